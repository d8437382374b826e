"""Byte-level interop with the real rlmesh 0.1.0 env server.

rlmesh 0.1.0 has no public function that returns spec bytes or value leaves,
so we compare on the wire instead: an in-process ``rlmesh.EnvServer`` serves an
env whose spaces use every kind and dtype; we read its contract over gRPC and
compare the SpaceSpec bytes with ``from_gymnasium``; we decode its reset and
step observations with our codec and compare them with what the env returned;
and we send actions encoded by us and compare with what the env received.
"""

from __future__ import annotations

import queue
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio._protocol import PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb, env_pb
from rlmesh_trio.spaces import (
    decode,
    decode_batch,
    decode_stacked,
    encode,
    encode_batch,
    from_gymnasium,
)

pytestmark = pytest.mark.interop

rlmesh = pytest.importorskip("rlmesh")
grpc = pytest.importorskip("grpc")


INT_DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64)


def obs_space() -> gym.spaces.Dict:
    return gym.spaces.Dict(
        [
            ("zpos", gym.spaces.Box(np.array([-1, -np.inf, 0], np.float32), 1.0, (3,), np.float32)),
            ("img", gym.spaces.Box(0, 255, (2, 2, 3), np.uint8)),
            ("flags", gym.spaces.MultiBinary([2, 3])),
            ("md", gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]))),
            ("d", gym.spaces.Discrete(5, start=-2)),
            ("txt", gym.spaces.Text(6, charset="abcé€")),
            (
                "tup",
                gym.spaces.Tuple(
                    (
                        gym.spaces.Discrete(2),
                        gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
                        gym.spaces.Box(0, 1, (2,), np.float16),
                        gym.spaces.Box(0, 1, (1,), np.bool_),
                    )
                ),
            ),
            (
                "ints",
                gym.spaces.Tuple(
                    [
                        gym.spaces.Box(-3, 3, (2,), dt)
                        if np.dtype(dt).kind == "i"
                        else gym.spaces.Box(0, 9, (2,), dt)
                        for dt in INT_DTYPES
                    ]
                ),
            ),
            (
                "inner",
                gym.spaces.Dict(
                    [("b", gym.spaces.Box(0, 1, (1,), np.float32)), ("a", gym.spaces.Text(3))]
                ),
            ),
        ]
    )


def action_space() -> gym.spaces.Tuple:
    return gym.spaces.Tuple(
        (
            gym.spaces.Discrete(3, start=1),
            gym.spaces.Box(-1, 1, (2,), np.float32),
            gym.spaces.MultiBinary(2),
            gym.spaces.MultiDiscrete([2, 2]),
            gym.spaces.Text(4, charset="xyzé"),
            gym.spaces.Dict(
                [("y", gym.spaces.Discrete(2)), ("x", gym.spaces.Box(-5, 5, (1,), np.int32))]
            ),
        )
    )


class AllKindsEnv(gym.Env[Any, Any]):
    """Returns seeded samples of ``obs_space()`` and records every action it receives."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self) -> None:
        self.observation_space = obs_space()
        self.action_space = action_space()
        self.observations: list[Any] = []
        self.actions: list[Any] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        obs = self.observation_space.sample()
        self.observations.append(obs)
        return obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.actions.append(action)
        obs = self.observation_space.sample()
        self.observations.append(obs)
        return obs, 1.0, False, False, {}


def same(got: Any, want: Any) -> None:
    """Compare a value decoded by one side with the value the other side produced."""
    if isinstance(want, dict):
        assert set(got) == set(want)
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, tuple | list) and not isinstance(got, np.ndarray):
        assert len(got) == len(want)
        for x, y in zip(got, want, strict=True):
            same(x, y)
    elif isinstance(want, str):
        assert got == want
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.fixture
def served() -> Iterator[tuple[AllKindsEnv, str]]:
    env = AllKindsEnv()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rlmesh's unpinned-edition warning
        server = rlmesh.EnvServer(env, "127.0.0.1:0")
        server.start()
    try:
        yield env, server.address.removeprefix("tcp://")
    finally:
        server.shutdown()


class JoinSession:
    """A blocking Join stream over grpcio: one request, one response, in order."""

    def __init__(self, channel: Any) -> None:
        self._requests: queue.Queue[env_pb.JoinRequest | None] = queue.Queue()
        join = channel.stream_stream(
            "/rlmesh.env.v1.EnvService/Join",
            request_serializer=bytes,
            response_deserializer=env_pb.JoinResponse.parse,
        )
        self._responses = join(self._feed(), timeout=30)
        self._count = 0

    def _feed(self) -> Iterator[env_pb.JoinRequest]:
        while (item := self._requests.get(timeout=20)) is not None:
            yield item

    def call(self, **arm: Any) -> env_pb.JoinResponse:
        self._count += 1
        request_id = f"grpc-req-{self._count}"
        self._requests.put(env_pb.JoinRequest(request_id=request_id, **arm))
        reply: env_pb.JoinResponse = next(self._responses)
        assert reply.request_id == request_id and reply.error is None, reply
        return reply

    def close(self) -> None:
        """Close the envs; the server then ends the stream, which we read to its end."""
        reply = self.call(close=env_pb.CloseEnvsRequest(reason="test done"))
        assert reply.close is not None
        self._requests.put(None)
        for _ in self._responses:
            pass


def handshake(channel: Any) -> env_pb.HandshakeResponse:
    call = channel.unary_unary(
        "/rlmesh.env.v1.EnvService/Handshake",
        request_serializer=bytes,
        response_deserializer=env_pb.HandshakeResponse.parse,
    )
    request = env_pb.HandshakeRequest(
        base=core_pb.HandshakeRequest(
            protocol_generation=PROTOCOL_GENERATION,
            supported_workflow_editions=[WORKFLOW_EDITION],
        )
    )
    response: env_pb.HandshakeResponse = call(request, timeout=10)
    return response


def test_contract_spec_bytes_match_rlmesh(served: tuple[AllKindsEnv, str]) -> None:
    env, address = served
    with grpc.insecure_channel(address) as channel:
        response = handshake(channel)
    assert response.base is not None and response.base.compatible
    assert response.env_contract is not None and response.env_contract.spec is not None
    spec = response.env_contract.spec
    assert spec.observation_space is not None and spec.action_space is not None
    assert bytes(spec.observation_space) == bytes(from_gymnasium(env.observation_space))
    assert bytes(spec.action_space) == bytes(from_gymnasium(env.action_space))


def test_values_cross_the_wire_both_ways(served: tuple[AllKindsEnv, str]) -> None:
    env, address = served
    obs_spec = from_gymnasium(env.observation_space)
    act_spec = from_gymnasium(env.action_space)
    act_space = action_space()
    act_space.seed(5)
    actions = [act_space.sample() for _ in range(3)]
    with grpc.insecure_channel(address) as channel:
        session = JoinSession(channel)
        reply = session.call(reset=env_pb.ResetRequest(seeds=[11], episode_ids=["e1"]))
        assert reply.reset is not None and reply.reset.observation is not None
        same(decode(obs_spec, reply.reset.observation), env.observations[-1])
        for action in actions:
            step = env_pb.StepRequest(action=encode(act_spec, action), episode_ids=["e1"])
            reply = session.call(step=step)
            assert reply.step is not None and reply.step.observation is not None
            got = decode(obs_spec, reply.step.observation)
            same(got, env.observations[-1])
            assert env.observation_space.contains(got)
            same(env.actions[-1], action)
        session.close()
    assert len(env.actions) == len(actions)


class _RecordingVector(gym.vector.SyncVectorEnv):
    """A 2-lane vector env that remembers its last batched observation and actions."""

    def __init__(self) -> None:
        super().__init__(
            [AllKindsEnv, AllKindsEnv], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP
        )
        self.last_obs: Any = None
        self.actions: list[Any] = []

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        obs, info = super().reset(seed=seed, options=options)
        self.last_obs = obs
        return obs, info

    def step(self, actions: Any) -> Any:
        self.actions.append(actions)
        result = super().step(actions)
        self.last_obs = result[0]
        return result


def test_vector_slabs_match_gymnasium_batching() -> None:
    """A 0.1.0 vector server sends 2-lane slabs; decode_stacked matches gymnasium's batch."""
    env = _RecordingVector()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = rlmesh.EnvServer(env, "127.0.0.1:0")
        server.start()
    try:
        address = server.address.removeprefix("tcp://")
        obs_spec = from_gymnasium(env.single_observation_space)
        act_spec = from_gymnasium(env.single_action_space)
        act_space = action_space()
        act_space.seed(9)
        lanes = [act_space.sample() for _ in range(2)]
        with grpc.insecure_channel(address) as channel:
            session = JoinSession(channel)
            reset = env_pb.ResetRequest(seeds=[3, 4], episode_ids=["a", "b"])
            reply = session.call(reset=reset)
            assert reply.reset is not None and reply.reset.observation is not None
            same(decode_stacked(obs_spec, reply.reset.observation, 2), env.last_obs)
            action = encode_batch(act_spec, lanes)
            reply = session.call(step=env_pb.StepRequest(action=action, episode_ids=["a", "b"]))
            assert reply.step is not None and reply.step.observation is not None
            same(decode_stacked(obs_spec, reply.step.observation, 2), env.last_obs)
            for i, lane in enumerate(decode_batch(obs_spec, reply.step.observation, 2)):
                assert env.single_observation_space.contains(lane), i
            # gymnasium hands the env a batched action; compare it with our stacked form.
            same(env.actions[-1], decode_stacked(act_spec, action, 2))
            session.close()
    finally:
        server.shutdown()
