"""The per-step observation framing check: skipped only for an env that frames in process.

A ``LocalEnv`` encodes every observation with the codec for its own
contract's spec object, so a route checking against that very object skips
the check. Any other spec (a route-supplied contract) or endpoint is checked.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import Limits, RouteDriver, RouteSpec
from rlmesh_trio._envhost import make_host
from rlmesh_trio._errors import ProtocolError
from rlmesh_trio._protocol import spaces_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.inprocess._local_env import LocalEnv
from rlmesh_trio.inprocess._local_model import LocalModel
from rlmesh_trio.runtime._calls import RouteCalls
from rlmesh_trio.runtime._telemetry import RouteTelemetry
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


class WideEnv(gym.Env[np.ndarray, int]):
    """CartPole's action space, a wider observation: a contract that does not fit CartPole."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    action_space = gym.spaces.Discrete(2)


def _spec(**kw: object) -> RouteSpec:
    return RouteSpec(route_id="r0", session_id="s", max_episodes=1, limits=Limits(), **kw)


def _calls(env: object) -> RouteCalls:
    return RouteCalls(_spec(), env, ScriptedModel(), RouteTelemetry(1.0, 0.0), lambda: 0.0)  # type: ignore[arg-type]


async def test_only_the_envs_own_spec_object_is_trusted() -> None:
    env = LocalEnv(gym.make("CartPole-v1"))
    assert env.encoded_observation_space is None  # not connected yet
    info = await env.connect()
    own = info.contract.spec.observation_space
    assert env.encoded_observation_space is own
    calls = _calls(env)
    calls.set_observation_space(own)
    calls.check_observation(_malformed(), 1, "step")  # trusted: not checked
    calls.set_observation_space(own.__class__().from_dict(own.to_dict()))  # an equal copy
    with pytest.raises(ProtocolError, match="malformed observation on step"):
        calls.check_observation(_malformed(), 1, "step")
    scripted = _calls(ScriptedEnv(episode_lengths=2))
    scripted.set_observation_space(own)
    with pytest.raises(ProtocolError, match="malformed observation on step"):
        scripted.check_observation(_malformed(), 1, "step")
    await env.aclose()


def _malformed() -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[b"\x00" * 3])


async def test_a_route_contract_that_does_not_fit_the_local_env_is_still_checked() -> None:
    other = make_host(WideEnv()).contract
    driver = RouteDriver(
        _spec(contract=other), LocalEnv(gym.make("CartPole-v1")), LocalModel(cartpole_policy)
    )
    with pytest.raises(ProtocolError, match="malformed observation on reset"):
        await driver.run()
