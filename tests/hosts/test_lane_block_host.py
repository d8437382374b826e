"""A lane endpoint's multi-lane subset requests (a lane block): per-lane answers, in order.

``CAP_MULTI_LANE_SUBSET`` says one StepRequest/ResetRequest may name several
lanes. Each lane keeps its own seed, episode id and episode record; rewards,
masks and observations come back in the order of ``env_indices``.
"""

from __future__ import annotations

import struct
from typing import Any

import gymnasium as gym
import numpy as np

from rlmesh_trio import spaces
from rlmesh_trio._envhost import HostReply, LaneHost, make_host
from rlmesh_trio._protocol import CAP_MULTI_LANE_SUBSET, env_pb, spaces_pb

from .._envhost_envs import BoxActionEnv, CountingEnv

Code = env_pb.EnvErrorCode


def act(*values: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[b"".join(struct.pack("<q", v) for v in values)])


def reset(host: LaneHost, **kw: Any) -> HostReply:
    return host.handle(env_pb.JoinRequest(reset=env_pb.ResetRequest(**kw)))


def step(host: LaneHost, *actions: int, **kw: Any) -> HostReply:
    return host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=act(*actions), **kw)))


def cartpoles(n: int) -> LaneHost:
    host = make_host([gym.make("CartPole-v1") for _ in range(n)])
    assert isinstance(host, LaneHost)
    return host


def rows(host: LaneHost, value: spaces_pb.SpaceValue, n: int) -> np.ndarray:
    spec = host.contract.spec.observation_space
    return np.asarray(spaces.decode_stacked(spec, value, n))


def test_the_capability_is_advertised_beside_subset_step() -> None:
    host = cartpoles(2)
    assert host.capabilities[CAP_MULTI_LANE_SUBSET] == "true"
    assert host.capabilities["subset_step"] == "true"


def test_a_multi_lane_reset_seeds_each_lane_like_a_single_env() -> None:
    host = cartpoles(4)
    lanes, seeds = [3, 1, 0, 2], [30, 10, 0, 20]
    reply = reset(host, seeds=seeds, env_indices=lanes, episode_ids=["d", "b", "a", "c"])
    got = rows(host, reply.response.reset.observation, 4)
    for row, seed in zip(got, seeds, strict=True):
        expected, _ = gym.make("CartPole-v1").reset(seed=seed)
        np.testing.assert_array_equal(row, expected)
    # No lane has a reset info: the subset answer's infos is the empty map.
    assert reply.response.reset.infos == spaces_pb.MetaMap()


def test_a_multi_lane_step_answers_in_env_indices_order_and_books_each_lane() -> None:
    host = make_host([CountingEnv(done_at=k) for k in (3, 1, 2)])
    assert isinstance(host, LaneHost)
    reset(host, seeds=[7, 5, 6], env_indices=[2, 0, 1], episode_ids=["c", "a", "b"])
    first = step(host, 1, 2, 0, env_indices=[1, 2, 0], episode_ids=["b", "c", "a"])
    body = first.response.step
    assert list(body.env_indices) == [1, 2, 0]
    assert body.rewards == [1.5, 2.5, 0.5]
    assert body.terminated_mask == b"\x01\x00\x00" and body.truncated_mask == b"\x00\x00\x00"
    np.testing.assert_array_equal(rows(host, body.observation, 3), [[1.0], [1.0], [1.0]])
    [ended] = body.completed_episodes
    assert (ended.episode_id, ended.seed, ended.env_index) == ("b", 6, 1)
    assert (ended.step_count, ended.cumulative_reward, ended.terminated) == (1, 1.5, True)
    assert spaces.meta_to_python(ended.final_info) == {"t": 1, "is_success": True}
    # CountingEnv has step infos: the 0.1.0 lane layout, per lane in request order.
    infos = spaces.meta_to_python(body.infos)
    assert infos["_final_info"] == [True, False, False]
    assert [i["t"] for i in infos["final_info"]] == [1, 1, 1]
    second = step(host, 0, 2, env_indices=[0, 2], episode_ids=["a", "c"])
    ids = [(m.episode_id, m.seed, m.step_count) for m in second.response.step.completed_episodes]
    assert ids == [("c", 7, 2)]


def test_a_multi_lane_step_of_cartpole_carries_no_per_lane_infos() -> None:
    host = cartpoles(3)
    reset(host, seeds=[1, 2, 3], env_indices=[0, 1, 2], episode_ids=["a", "b", "c"])
    body = step(host, 0, 1, 0, env_indices=[0, 1, 2], episode_ids=["a", "b", "c"]).response.step
    assert body.infos == spaces_pb.MetaMap()
    # One lane alone still answers as 0.1.0 does (its own info map).
    one = step(host, 1, env_indices=[2], episode_ids=["c"]).response.step
    assert one.infos == spaces_pb.MetaMap() and list(one.env_indices) == [2]


def test_an_env_failure_in_a_multi_lane_step_names_its_lane() -> None:
    envs = [CountingEnv(done_at=9) for _ in range(3)]
    envs[2].fail_with = RuntimeError("boom")
    host = make_host(envs)
    reset(host, env_indices=[0, 1, 2], episode_ids=["a", "b", "c"])
    error = step(host, 0, 0, 0, env_indices=[0, 1, 2]).response.error
    assert error.code == Code.INTERNAL and not error.is_recoverable
    assert error.message == "env_index 2: step failed: RuntimeError: boom"


def test_one_lane_and_whole_width_failures_keep_the_0_1_0_message() -> None:
    envs = [CountingEnv(done_at=9) for _ in range(2)]
    envs[1].fail_with = RuntimeError("boom")
    host = make_host(envs)
    reset(host, env_indices=[1], episode_ids=["b"])
    error = step(host, 0, env_indices=[1]).response.error
    assert error.message == "step failed: RuntimeError: boom"
    # A whole-width request (no env_indices) too: only a several-lane subset names lanes.
    reset(host, episode_ids=["a", "b"])
    whole = step(host, 0, 0).response.error
    assert whole.message == "step failed: RuntimeError: boom"


def test_out_of_bounds_observations_warn_per_lane_once() -> None:
    # CountingEnv's observation is t, bounded by 10: lane 1 crosses it first.
    host = make_host([CountingEnv(done_at=99) for _ in range(2)])
    reset(host, env_indices=[0, 1], episode_ids=["a", "b"])
    for _ in range(10):
        quiet = step(host, 0, 0, env_indices=[0, 1]).response.step
        assert "rlmesh.conformance.warning" not in spaces.meta_to_python(quiet.infos)
    step(host, 0, env_indices=[1])  # lane 1 at t=11
    both = spaces.meta_to_python(step(host, 0, 0, env_indices=[0, 1]).response.step.infos)
    lane_warnings = [info.get("rlmesh.conformance.warning") for info in both["final_info"]]
    assert lane_warnings[0] is not None and len(lane_warnings[0]) == 1  # lane 0: first time
    assert lane_warnings[1] is None  # lane 1 was warned on its one-lane step already


def _box_actions(*rows: tuple[float, float]) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[np.asarray(rows, dtype="<f4").tobytes()])


def test_strict_validation_refuses_an_out_of_bounds_action_naming_its_lane() -> None:
    host = LaneHost([BoxActionEnv() for _ in range(3)], validation="strict")
    reset(host, env_indices=[0, 1, 2], episode_ids=["a", "b", "c"])
    action = _box_actions((0.0, 0.0), (0.5, 0.5), (0.0, 3.0))
    request = env_pb.StepRequest(action=action, env_indices=[2, 0, 1])
    error = host.handle(env_pb.JoinRequest(step=request)).response.error
    assert error.code == Code.INVALID_ACTION and error.is_recoverable
    assert error.message == "env_index 1: $: Box value at element 1 out of bounds: above high bound"


def test_a_nan_action_in_a_multi_lane_step_names_its_lane() -> None:
    host = LaneHost([BoxActionEnv() for _ in range(2)])
    reset(host, env_indices=[0, 1], episode_ids=["a", "b"])
    request = env_pb.StepRequest(action=_box_actions((np.nan, 0.0), (0.0, 0.0)), env_indices=[1, 0])
    error = host.handle(env_pb.JoinRequest(step=request)).response.error
    assert error.message == "env_index 1: $: Box value at element 0 is NaN"
