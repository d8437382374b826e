"""A one-env endpoint's planned step answers exactly as the general N-lane step does.

The one-lane host (``make_host(env)``) steps through ``OneLanePlan``; lane 0
of a two-lane host (``make_host([env, twin])``) takes the general path. The
same seeds and actions must give the same observation bytes, rewards,
masks, infos (conformance warnings included), completed episodes and error
messages.
"""

from __future__ import annotations

import struct
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import spaces
from rlmesh_trio._envhost import EnvHost, LaneHost, make_host
from rlmesh_trio._envhost._one_lane import finite_bounds, may_be_nan, may_warn
from rlmesh_trio._protocol import env_pb, spaces_pb

from .._envhost_envs import BoxActionEnv, CountingEnv, RichEnv


class DriftingEnv(gym.Env[np.ndarray, int]):
    """Observations that leave their Box bounds, in a dtype other than the space's."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> Any:
        self._t += 1
        # float64, and out of bounds from the second step on (element 1 above high).
        obs = np.array([0.5, 0.6 * self._t], dtype=np.float64)
        return obs, 1.0, self._t >= 4, False, {"t": self._t}


def _host_pair(make: Any) -> tuple[EnvHost, EnvHost]:
    return make_host(make()), make_host([make(), make()])


def _step(host: EnvHost, action: spaces_pb.SpaceValue | None) -> Any:
    call = host.call_now("step", env_pb.StepRequest(action=action, env_indices=[0]))
    assert call is not None
    return call


def _same_answer(one: Any, general: Any) -> None:
    assert (one.error is None) == (general.error is None)
    if one.error is not None:
        assert one.error.to_dict() == general.error.to_dict()
        assert one.end_stream == general.end_stream
        return
    a, b = one.answer, general.answer
    assert a.observation.leaves == b.observation.leaves
    assert list(a.rewards) == list(b.rewards)
    assert (a.terminated_mask, a.truncated_mask) == (b.terminated_mask, b.truncated_mask)
    assert spaces.meta_to_python(a.infos) == spaces.meta_to_python(b.infos)
    assert list(a.env_indices) == list(b.env_indices) == [0]
    keep = ("episode_id", "seed", "env_index", "step_count", "cumulative_reward", "terminated")
    assert [[getattr(m, k) for k in keep] for m in a.completed_episodes] == [
        [getattr(m, k) for k in keep] for m in b.completed_episodes
    ]


def _reset_both(hosts: tuple[EnvHost, EnvHost], seed: int) -> None:
    for host in hosts:
        host.call_now(
            "reset", env_pb.ResetRequest(env_indices=[0], seeds=[seed], episode_ids=["e"])
        )


def _discrete(value: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[struct.pack("<q", value)])


@pytest.mark.parametrize("make", [lambda: gym.make("CartPole-v1"), CountingEnv, DriftingEnv])
def test_discrete_action_steps_match_the_general_path(make: Any) -> None:
    hosts = _host_pair(make)
    _reset_both(hosts, 7)
    for k in range(12):
        action = _discrete(k % 2)
        _same_answer(_step(hosts[0], action), _step(hosts[1], action))


def test_out_of_bounds_observations_warn_once_as_in_the_general_path() -> None:
    one, general = _host_pair(DriftingEnv)
    _reset_both((one, general), 0)
    warned = []
    for _ in range(3):
        a, b = _step(one, _discrete(0)), _step(general, _discrete(0))
        _same_answer(a, b)
        warned.append("rlmesh.conformance.warning" in spaces.meta_to_python(a.answer.infos))
    assert warned == [False, True, False]  # out of bounds from step 2, reported once


def test_box_actions_nan_and_bounds_match_the_general_path() -> None:
    one, general = _host_pair(BoxActionEnv)
    _reset_both((one, general), 0)
    spec = one.contract.spec.action_space
    for value in ([0.5, -0.5], [2.0, 0.0], [0.0, float("nan")]):
        action = spaces.encode(spec, np.array(value, np.float32))
        _same_answer(_step(one, action), _step(general, action))
    nan = _step(one, spaces.encode(spec, np.array([0.0, float("nan")], np.float32)))
    assert nan.error is not None and "is NaN" in nan.error.message


def test_bad_actions_give_the_general_path_errors() -> None:
    one, general = _host_pair(lambda: gym.make("CartPole-v1"))
    _reset_both((one, general), 0)
    for action in (
        None,
        _discrete(5),
        spaces_pb.SpaceValue(leaves=[b"\x00"]),
        spaces_pb.SpaceValue(),
    ):
        _same_answer(_step(one, action), _step(general, action))


def test_dict_spaces_take_the_general_encoder_with_the_same_result() -> None:
    one, general = _host_pair(RichEnv)
    _reset_both((one, general), 0)
    spec = one.contract.spec.action_space
    action = spaces.encode(spec, RichEnv.action_space.sample())
    _same_answer(_step(one, action), _step(general, action))


def test_whole_width_step_of_one_env_answers_without_env_indices() -> None:
    host = make_host(gym.make("CartPole-v1"))
    host.call_now("reset", env_pb.ResetRequest(seeds=[0], episode_ids=["e"]))
    call = host.call_now("step", env_pb.StepRequest(action=_discrete(1)))
    assert call is not None and call.error is None
    assert list(call.answer.env_indices) == [] and call.answer.terminated_mask == b"\x00"
    wrong = host.call_now("step", env_pb.StepRequest(action=_discrete(1), env_indices=[1]))
    assert wrong is not None and wrong.error is not None
    assert "out of range for num_envs 1" in wrong.error.message


def test_plans_skip_only_checks_that_cannot_fire() -> None:
    assert not may_be_nan(gym.spaces.Discrete(3)) and not may_warn(gym.spaces.Discrete(3))
    assert may_be_nan(gym.spaces.Box(-1, 1, (2,), np.float32))
    assert not may_be_nan(gym.spaces.Box(0, 5, (2,), np.int64))
    assert may_warn(gym.spaces.Box(0, 5, (2,), np.int64))
    assert not may_warn(gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))
    assert may_warn(gym.spaces.Dict({"t": gym.spaces.Text(4), "d": gym.spaces.Discrete(2)}))
    assert may_be_nan(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1))))
    cartpole = gym.make("CartPole-v1").observation_space
    assert [index for index, _, _ in finite_bounds(cartpole) or []] == [0, 2]
    assert finite_bounds(gym.spaces.Box(0, 1, (100,), np.float32)) is None


@pytest.mark.parametrize("policy", ["strict", "off"])
def test_validation_policies_act_alike_on_both_paths(policy: str) -> None:
    one = LaneHost([BoxActionEnv()], validation=policy)
    general = LaneHost([BoxActionEnv(), BoxActionEnv()], validation=policy)
    _reset_both((one, general), 0)
    spec = one.contract.spec.action_space
    action = spaces.encode(spec, np.array([2.0, 0.0], np.float32))  # above the high bound
    a, b = _step(one, action), _step(general, action)
    _same_answer(a, b)
    assert (a.error is not None) == (policy == "strict")
