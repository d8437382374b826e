"""ScriptedEnv(contract=...) emits observations that fit the contract's space (issue 12
item 19), seeded samples or a user function, so the fake stands in for a real env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import spaces
from rlmesh_trio._envhost import make_host
from rlmesh_trio._protocol import core_pb, env_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.testing import ScriptedEnv


def contract_of(env: Any, num_envs: int = 1) -> core_pb.EnvContract:
    contract = make_host(env).contract
    contract.num_envs = num_envs
    return contract


CARTPOLE = contract_of(gym.make("CartPole-v1"))


async def test_a_cartpole_contract_route_completes_with_cartpole_shaped_observations() -> None:
    seen: list[Any] = []

    def policy(obs: Any) -> int:
        seen.append(obs)
        return cartpole_policy(obs)

    env = ScriptedEnv(contract=CARTPOLE, episode_lengths=4)
    route = rt.Route(env=env, model=policy, seeds=[1, 2])
    report = await rt.run_routes([route], handle_sigint=False)
    assert report.routes[0].status == "completed" and report.total_steps == 8
    box = gym.make("CartPole-v1").observation_space
    assert len(seen) == 8 and all(np.asarray(o).shape == (4,) for o in seen)
    assert all(np.asarray(o).dtype == np.float32 for o in seen)
    assert all(box.contains(np.asarray(o, np.float32)) for o in seen)


async def _observed(env: ScriptedEnv, seeds: list[int]) -> list[list[float]]:
    seen: list[list[float]] = []

    def policy(obs: Any) -> int:
        seen.append(np.asarray(obs).tolist())
        return 0

    await rt.run_routes([rt.Route(env=env, model=policy, seeds=seeds)], handle_sigint=False)
    return seen


async def test_sampled_observations_are_reproducible_per_seed() -> None:
    first = await _observed(ScriptedEnv(contract=CARTPOLE, episode_lengths=3), [5, 6])
    again = await _observed(ScriptedEnv(contract=CARTPOLE, episode_lengths=3), [5, 6])
    other = await _observed(ScriptedEnv(contract=CARTPOLE, episode_lengths=3), [7, 8])
    assert first == again and first != other


async def test_rich_spaces_and_lanes() -> None:
    space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1, 1, (2,)),
            "mode": gym.spaces.Discrete(3),
            "tag": gym.spaces.Text(4),
        }
    )

    class Rich(gym.Env[Any, Any]):
        observation_space = space
        action_space = gym.spaces.Discrete(2)

    env = ScriptedEnv(contract=contract_of(Rich(), num_envs=3), episode_lengths=2)
    await env.connect()
    reply = await env.reset(env_pb.ResetRequest(seeds=[1, 2, 3], episode_ids=["a", "b", "c"]))
    spec = contract_of(Rich()).spec
    assert spec is not None and spec.observation_space is not None
    values = spaces.decode_batch(spec.observation_space, reply.response.observation, 3)
    assert all(space.contains(v) for v in values)


async def test_a_user_function_gives_the_observations() -> None:
    def obs_fn(env_index: int, step: int, seed: int | None) -> Any:
        return np.array([seed or 0, step, env_index, 0.5], np.float32)

    seen = await _observed(
        ScriptedEnv(contract=CARTPOLE, episode_lengths=2, observations=obs_fn), [9]
    )
    assert seen == [[9.0, 0.0, 0.0, 0.5], [9.0, 1.0, 0.0, 0.5]]


async def test_the_default_contract_keeps_its_two_float_observations() -> None:
    env = ScriptedEnv(num_envs=2)
    reply = await env.reset(env_pb.ResetRequest(seeds=[1, 2], episode_ids=["a", "b"]))
    (leaf,) = reply.response.observation.leaves
    assert np.frombuffer(leaf, np.float32).tolist() == [0.0, 0.0, 1.0, 0.0]


def test_observations_need_a_contract_observation_space() -> None:
    bare = core_pb.EnvContract(spec=None, num_envs=1)
    with pytest.raises(ValueError, match="observation space"):
        ScriptedEnv(contract=bare, observations=lambda k, t, s: 0)
