"""A served lane endpoint stepped as one block: the wire bytes, the client, the episodes.

Against our server (``CAP_MULTI_LANE_SUBSET``) a block step is one
StepRequest naming every lane; the episodes it runs equal a plain gymnasium
loop over single envs with the same seeds and policy.
"""

from __future__ import annotations

import struct

import gymnasium as gym
import numpy as np
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio import Orchestrator, RemoteEnv, RuntimeHooks, serve_env
from rlmesh_trio._blocks import LaneBlockEnv
from rlmesh_trio._errors import EnvRpcError
from rlmesh_trio._protocol import WORKFLOW_EDITION, env_pb
from rlmesh_trio.hooks.events import StepCompletedEvent

from .._envhost_envs import CountingEnv, RichEnv
from .._faults_raw import RawStream
from .._lane_block_loop import angle_policy, drive_block, plain_episodes

SEEDS = [11, 3, 42, 7, 0, 19, 5, 23, 8, 31]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _varint(len(payload)) + payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _arm(data: bytes, number: int) -> bytes:
    """The bytes of length-delimited field ``number`` of a message (skipping the rest)."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        if key & 7 == 0:
            _, pos = _read_varint(data, pos)
            continue
        size, pos = _read_varint(data, pos)
        if key >> 3 == number:
            return data[pos : pos + size]
        pos += size
    raise AssertionError(f"no field {number}")


async def test_a_multi_lane_step_goes_byte_for_byte() -> None:
    lanes, actions, ids = [2, 0, 1], [1, 0, 1], [b"c", b"a", b"b"]
    seeds = {0: 5, 1: 6, 2: 7}
    twins = {lane: gym.make("CartPole-v1") for lane in range(3)}
    for lane, twin in twins.items():
        twin.reset(seed=seeds[lane])
    async with serve_env([gym.make("CartPole-v1") for _ in range(3)], "127.0.0.1:0") as server:
        raw = RawStream(server.address, "/rlmesh.env.v1.EnvService/Join")
        await raw.open()
        configure = env_pb.ConfigureEnvRequest(selected_workflow_edition=WORKFLOW_EDITION)
        await raw.send(bytes(env_pb.JoinRequest(configure=configure, request_id="grpc-req-1")))
        reset = env_pb.ResetRequest(
            seeds=[5, 6, 7], env_indices=[0, 1, 2], episode_ids=["a", "b", "c"]
        )
        await raw.send(bytes(env_pb.JoinRequest(reset=reset, request_id="grpc-req-2")))
        for _ in range(2):
            await raw.recv()
        leaf = b"".join(struct.pack("<q", a) for a in actions)
        step = _field(0x0A, _field(0x0A, leaf)) + _field(0x1A, bytes(lanes))
        step += b"".join(_field(0x22, i) for i in ids)
        await raw.send(_field(0x12, step) + _field(0x2A, b"grpc-req-3"))
        with trio.fail_after(10):
            answer = _arm(await raw.recv(), 2)  # JoinResponse.step
        await raw.close()
    observations = b""
    for lane, action in zip(lanes, actions, strict=True):
        obs, *_ = twins[lane].step(action)
        observations += np.asarray(obs, dtype="<f4").tobytes()
    expected = _field(0x0A, _field(0x0A, observations))  # observation: one leaf, 3 lanes
    expected += _field(0x12, struct.pack("<3d", 1.0, 1.0, 1.0))  # rewards
    expected += _field(0x1A, b"\x00\x00\x00") + _field(0x22, b"\x00\x00\x00")  # masks
    expected += _field(0x2A, b"")  # infos: no lane has one
    expected += _field(0x3A, bytes(lanes))  # env_indices echoed
    assert answer == expected


async def _connected(address: str) -> RemoteEnv:
    env = RemoteEnv(address)
    await env.connect()
    await env.configure(WORKFLOW_EDITION)
    return env


async def test_block_episodes_equal_a_plain_gymnasium_loop() -> None:
    envs = [gym.make("CartPole-v1") for _ in range(4)]
    async with serve_env(envs, "127.0.0.1:0") as server:
        env = await _connected(server.address)
        try:
            assert isinstance(env, LaneBlockEnv) and env.block_ready and env.num_lanes == 4
            got = await drive_block(env, SEEDS, angle_policy)
        finally:
            await env.aclose()
    assert got == plain_episodes("CartPole-v1", SEEDS, angle_policy)


async def test_a_lane_failure_names_the_lane() -> None:
    envs = [CountingEnv(done_at=9) for _ in range(3)]
    envs[2].fail_with = RuntimeError("boom")
    async with serve_env(envs, "127.0.0.1:0") as server:
        env = await _connected(server.address)
        try:
            lanes = np.arange(3)
            await env.reset_lanes(lanes, [None] * 3, [None] * 3, 10.0)
            with pytest.raises(EnvRpcError) as failed:
                await env.step_lanes(lanes, np.zeros(3, dtype=np.int64), 10.0)
        finally:
            await env.aclose()
    assert failed.value.env_index == 2
    assert failed.value.message == "environment error: [Internal] step failed: RuntimeError: boom"
    assert "on env_index 2" in str(failed.value)


async def test_reset_options_split_the_block_by_option() -> None:
    async with serve_env([CountingEnv() for _ in range(3)], "127.0.0.1:0") as server:
        env = await _connected(server.address)
        try:
            options = [{"trial_index": 4}, None, {"trial_index": 4}]
            got = await env.reset_lanes(np.arange(3), [1, 2, 3], options, 10.0)
        finally:
            await env.aclose()
    assert [info["seed"] for info in got.infos or ()] == [1, 2, 3]
    assert [info["options"] for info in got.infos or ()] == options


async def test_no_block_for_dict_spaces_or_a_vector_env() -> None:
    vector = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    for target in ([RichEnv(), RichEnv()], vector):
        async with serve_env(target, "127.0.0.1:0") as server:
            env = RemoteEnv(server.address)
            try:
                await env.connect()
                assert not env.block_ready
            finally:
                await env.aclose()


async def test_seeded_and_unseeded_lanes_reset_in_separate_requests() -> None:
    # One ResetRequest carries seeds for all its lanes or none: the block splits them.
    async with serve_env([CountingEnv() for _ in range(3)], "127.0.0.1:0") as server:
        env = await _connected(server.address)
        try:
            got = await env.reset_lanes(np.array([0, 1, 2]), [5, None, 0], [None] * 3, 10.0)
        finally:
            await env.aclose()
    assert [info["seed"] for info in got.infos or ()] == [5, None, 0]
    np.testing.assert_array_equal(got.observations, np.zeros((3, 1), dtype=np.float32))


@pytest.mark.parametrize(
    ("env_id", "actions", "lane", "text"),
    [
        (
            "CartPole-v1",
            np.array([0, 1, 5, 0]),
            2,
            "[InvalidAction] $: value 5 not in range [0, 2)",
        ),
        (
            "Pendulum-v1",
            np.array([[0.0], [0.0], [0.0], [np.nan]], dtype=np.float32),
            3,
            "[InvalidAction] $: Box value at element 0 is NaN",
        ),
    ],
)
async def test_a_bad_action_names_its_lane(
    env_id: str, actions: np.ndarray, lane: int, text: str
) -> None:
    async with serve_env([gym.make(env_id) for _ in range(4)], "127.0.0.1:0") as server:
        env = await _connected(server.address)
        try:
            lanes = np.arange(4)
            await env.reset_lanes(lanes, [1, 2, 3, 4], [None] * 4, 10.0)
            with pytest.raises(EnvRpcError) as failed:
                await env.step_lanes(lanes, actions, 10.0)
            # The error is recoverable: the lanes go on.
            again = await env.step_lanes(lanes, np.zeros_like(actions), 10.0)
        finally:
            await env.aclose()
    assert failed.value.env_index == lane and failed.value.recoverable
    assert failed.value.message == f"environment error: {text}"
    assert again.observations.shape[0] == 4


class _StepHook(RuntimeHooks):
    """A step hook: the route takes the per-lane path instead of the block."""

    async def step_completed(self, event: StepCompletedEvent) -> None:
        return None


@pytest.mark.parametrize("block", [True, False])
async def test_a_served_block_times_episodes_by_the_env_timestamps_as_lanes_do(
    mock_clock: trio.testing.MockClock, block: bool
) -> None:
    # The run's clock stands still (a MockClock that only moves when told), so an
    # episode timed by the runtime's clock lasts 0 s; the env's timestamps (real time,
    # in the server) give each episode its own positive duration, on both paths.
    async with serve_env([gym.make("CartPole-v1") for _ in range(3)], "127.0.0.1:0") as server:
        route = rt.Route(
            env=server.address,
            model=rt.policy(batched=angle_policy),
            seeds=SEEDS[:6],
            max_episode_steps=500,
        )
        hooks = None if block else _StepHook()
        report = await Orchestrator([route], hooks=hooks, handle_sigint=False).run()
    episodes = report.episodes
    assert len(episodes) == 6
    assert all(e.duration_s > 0 for e in episodes), [e.duration_s for e in episodes]
