"""Our EnvServer and ModelServer under random and malformed Join traffic (hypothesis).

Each server runs for the whole module in a thread of its own (``ServerThread``),
on real loopback gRPC; every hypothesis example is a fresh client in a fresh
Trio run that sends a short sequence of requests, one at a time, as raw
protobuf bytes. For every example:

* every request gets exactly one typed reply (one ``kind`` arm set) echoing its
  request id, unless an earlier reply ended the session;
* errors carry a code and a message, and never the "bug of ours" catch-all;
* a non-recoverable env error (or a Close) ends the stream with status OK and
  nothing after it; after a recoverable one the session still works (a valid
  probe request is answered normally);
* an envelope that cannot even be decoded ends the stream with a gRPC error
  status, never a crash;
* afterwards the server is alive and serves the next client normally.
"""

from __future__ import annotations

import math
import re
import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any

import betterproto2
import gymnasium as gym
import numpy as np
import pytest
import trio
from grpclib.const import Status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmesh_trio import serve_env, serve_model, spaces
from rlmesh_trio._protocol import WORKFLOW_EDITION, core_pb, env_pb, model_pb, spaces_pb

from .._asyncio_bridge import asyncio_loop
from .._faults_raw import ENV_JOIN, MODEL_JOIN, RawStream, ServerThread, StreamEnd

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
REPLY_TIMEOUT = 10.0

# Leaves in wire order (Dict keys sorted bytewise): b (2 x f32), d (i64), m (2 x i64), t (text).
VALUE_SPACE = gym.spaces.Dict(
    {
        "d": gym.spaces.Discrete(3, start=-1),
        "b": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "t": gym.spaces.Text(8),
        "m": gym.spaces.MultiDiscrete([2, 3]),
    }
)
VALUE_SPEC = spaces.from_gymnasium(VALUE_SPACE)
VALID_VALUE = {
    "d": 0,
    "b": np.array([0.5, -0.5], np.float32),
    "t": "abc",
    "m": np.array([1, 2], np.int64),
}
OBS_SPACE = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "note": gym.spaces.Text(12)}
)
ACTION_SPACE_MODEL = gym.spaces.Discrete(3)

# Our host's catch-all for an exception it did not expect ("a bug of ours").
BUG_TEXT = re.compile(r"(internal error: )?[A-Z]\w*(Error|Exception): ")
ENV_FAILURE_PREFIXES = ("reset failed:", "step failed:", "render failed:")
# A subset request naming several lanes names the lane at fault first.
LANE_NAMED = re.compile(r"^env_index \d+: ")


class FuzzEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """Dict action with every leaf kind; never raises from ``step``; 3-step episodes."""

    observation_space = OBS_SPACE
    action_space = VALUE_SPACE

    def __init__(self) -> None:
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([0.25, -0.25], np.float32), "note": f"t{self.t}"}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return self._obs(), 1.0, self.t >= 3, False, {}


def zero_policy(obs: Any) -> int:
    return 0


# ---------------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def env_server() -> Iterator[ServerThread]:
    server = ServerThread(lambda: serve_env(FuzzEnv(), "127.0.0.1:0"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def lanes_server() -> Iterator[ServerThread]:
    """Two lanes (``subset_step``): requests for different lanes run concurrently."""
    server = ServerThread(lambda: serve_env([FuzzEnv(), FuzzEnv()], "127.0.0.1:0"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def model_server() -> Iterator[ServerThread]:
    server = ServerThread(lambda: serve_model(zero_policy, "127.0.0.1:0"))
    server.start()
    yield server
    server.stop()


# ---------------------------------------------------------------------- value mutations


def valid_value(rows: int = 1) -> spaces_pb.SpaceValue:
    return spaces.encode_batch(VALUE_SPEC, [VALID_VALUE] * rows)


BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"ab\x80"]
MUTATIONS = (
    "none",
    "truncate",
    "extend",
    "random",
    "drop_leaf",
    "extra_leaf",
    "text_huge_count",
    "text_huge_length",
    "text_bad_utf8",
    "text_too_long",
    "discrete_out_of_range",
    "multidiscrete_out_of_range",
    "box_nan",
    "box_inf",
    "wrong_rows",
)


@st.composite
def mutated_value(draw: st.DrawFn, rows: int = 1) -> spaces_pb.SpaceValue:
    """A value of ``VALUE_SPEC`` for ``rows`` rows, usually broken in one way."""
    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "wrong_rows":
        return valid_value(draw(st.sampled_from([r for r in (1, 2, 3) if r != rows])))
    leaves = list(valid_value(rows).leaves)
    i = draw(st.integers(0, len(leaves) - 1))
    if mutation == "truncate" and leaves[i]:
        leaves[i] = leaves[i][: draw(st.integers(0, len(leaves[i]) - 1))]
    elif mutation == "extend":
        leaves[i] += draw(st.binary(min_size=1, max_size=16))
    elif mutation == "random":
        leaves[i] = draw(st.binary(max_size=48))
    elif mutation == "drop_leaf":
        del leaves[i]
    elif mutation == "extra_leaf":
        leaves.append(draw(st.binary(max_size=8)))
    elif mutation == "text_huge_count":
        count = draw(st.sampled_from([2, 1000, 10**12, 2**63, 2**64 - 1]))
        leaves[3] = struct.pack("<Q", count) + leaves[3][8:]
    elif mutation == "text_huge_length":
        length = draw(st.sampled_from([9, 2**31, 2**63, 2**64 - 1]))
        leaves[3] = struct.pack("<QQ", rows, length) * 1 + b"abc" * rows
    elif mutation == "text_bad_utf8":
        body = draw(st.sampled_from(BAD_UTF8))
        leaves[3] = struct.pack("<Q", rows) + struct.pack("<Q", len(body)) * rows + body * rows
    elif mutation == "text_too_long":
        body = b"x" * draw(st.integers(9, 64))
        leaves[3] = struct.pack("<Q", rows) + struct.pack("<Q", len(body)) * rows + body * rows
    elif mutation == "discrete_out_of_range":
        value = draw(st.sampled_from([-2, 2, 3, 2**62, -(2**63), 2**63 - 1]))
        leaves[1] = struct.pack("<q", value) * rows
    elif mutation == "multidiscrete_out_of_range":
        pair = draw(st.sampled_from([(2, 0), (0, 3), (-1, 0), (0, -(2**63))]))
        leaves[2] = struct.pack("<qq", *pair) * rows
    elif mutation == "box_nan":
        leaves[0] = struct.pack("<ff", math.nan, 0.0) * rows
    elif mutation == "box_inf":
        leaves[0] = struct.pack("<ff", math.inf, -math.inf) * rows
    return spaces_pb.SpaceValue(leaves=leaves)


# Field 99 (varint 1): an arm from a newer edition this build does not know.
UNKNOWN_FIELD = b"\x98\x06\x01"
# A request_id (field 5, length-delimited) that is not UTF-8: undecodable as a string.
GARBAGE_ENVELOPE = b"\x2a\x02\xff\xfe"

request_ids = st.text(max_size=12)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
editions = st.sampled_from([WORKFLOW_EDITION, "", "2099.01", "2026.06-rc.1", "nonsense"])


@st.composite
def env_request(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """``(kind, payload, request_id)`` for one env Join request."""
    rid = draw(request_ids)
    kind = draw(
        st.sampled_from(
            ["reset", "step", "step", "step", "configure", "render", "close", "unknown", "field99"]
        )
    )
    if kind == "reset":
        message = env_pb.JoinRequest(
            reset=env_pb.ResetRequest(
                seeds=draw(st.lists(i64, max_size=2)),
                env_indices=draw(st.lists(st.sampled_from([0, 0, 1, 2**32 - 1]), max_size=2)),
                episode_ids=draw(st.lists(st.text(max_size=4), max_size=2)),
                timeout_ms=draw(st.sampled_from([0, 0, 1000, 2**64 - 1])),
            )
        )
    elif kind == "step":
        action = None if draw(st.integers(0, 9)) == 0 else draw(mutated_value())
        message = env_pb.JoinRequest(
            step=env_pb.StepRequest(
                action=action,
                env_indices=draw(st.lists(st.sampled_from([0, 0, 1, 7]), max_size=2)),
                episode_ids=draw(st.lists(st.text(max_size=4), max_size=2)),
            )
        )
    elif kind == "configure":
        edition = draw(editions)
        message = env_pb.JoinRequest(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition=edition)
        )
    elif kind == "render":
        message = env_pb.JoinRequest(
            render=env_pb.RenderRequest(env_indices=draw(st.lists(u32, max_size=2)))
        )
    elif kind == "close":
        message = env_pb.JoinRequest(close=env_pb.CloseEnvsRequest(reason=draw(st.text())))
    else:
        message = env_pb.JoinRequest()
    message.request_id = rid
    payload = bytes(message) + (UNKNOWN_FIELD if kind == "field99" else b"")
    return kind, payload, rid


def _context(draw: st.DrawFn) -> model_pb.AdapterContext | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    return model_pb.AdapterContext(
        session_id=draw(st.sampled_from(["s", ""])),
        env_id=draw(st.sampled_from(["env-a", "env-b", ""])),
        request_id=draw(request_ids),
    )


def _env_spec(draw: st.DrawFn) -> core_pb.EnvSpec | None:
    choice = draw(st.sampled_from(["valid", "valid", "missing", "no_action", "bad_text"]))
    if choice == "missing":
        return None
    action: spaces_pb.SpaceSpec | None = spaces.from_gymnasium(ACTION_SPACE_MODEL)
    if choice == "no_action":
        action = None
    elif choice == "bad_text":
        action = spaces_pb.SpaceSpec(
            dtype=spaces_pb.DataType.UINT8, text=spaces_pb.TextSpec(min_length=0, max_length=0)
        )
    return core_pb.EnvSpec(id="Fuzz-v0", action_space=action, observation_space=VALUE_SPEC)


@st.composite
def predict_request(draw: st.DrawFn) -> model_pb.PredictRequest:
    rows = draw(st.integers(0, 3))
    if draw(st.integers(0, 4)) == 0:  # empty or duplicate episode ids
        ids = draw(st.lists(st.sampled_from(["e1", "e2", ""]), min_size=rows, max_size=rows))
    else:
        ids = [f"e{i}" for i in range(rows)]
    return model_pb.PredictRequest(
        context=_context(draw),
        observation=draw(mutated_value(max(rows, 1))) if draw(st.integers(0, 5)) else None,
        episode_info=[model_pb.EpisodeInfo(episode_id=e, seed=draw(st.none() | i64)) for e in ids],
    )


@st.composite
def model_request(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """``(kind, payload, request_id)`` for one model Join request."""
    rid = draw(request_ids)
    kind = draw(
        st.sampled_from(
            [
                "resolve_adapter",
                "resolve_adapter",
                "predict",
                "predict",
                "predict",
                "grouped_predict",
                "reset_adapter",
                "release_adapter",
                "close",
                "unknown",
                "field99",
            ]
        )
    )
    if kind == "resolve_adapter":
        message = model_pb.JoinRequest(
            resolve_adapter=model_pb.ResolveAdapterRequest(
                context=_context(draw),
                env_spec=_env_spec(draw),
                selected_workflow_edition=draw(editions),
                execution_horizon=draw(st.sampled_from([0, 1, 4, 2**32 - 1])),
            )
        )
    elif kind == "predict":
        message = model_pb.JoinRequest(predict=draw(predict_request()))
    elif kind == "grouped_predict":
        groups = draw(st.lists(predict_request(), max_size=3))
        message = model_pb.JoinRequest(
            grouped_predict=model_pb.GroupedPredictRequest(groups=groups)
        )
    elif kind == "reset_adapter":
        message = model_pb.JoinRequest(
            reset_adapter=model_pb.ResetAdapterRequest(
                context=_context(draw), episode_ids=draw(st.lists(st.text(max_size=3)))
            )
        )
    elif kind == "release_adapter":
        message = model_pb.JoinRequest(
            release_adapter=model_pb.ReleaseAdapterRequest(
                context=_context(draw), reason=draw(st.text(max_size=8))
            )
        )
    elif kind == "close":
        message = model_pb.JoinRequest(close=model_pb.CloseParticipantRequest(reason="fuzz"))
    else:
        message = model_pb.JoinRequest()
    message.request_id = rid
    payload = bytes(message) + (UNKNOWN_FIELD if kind == "field99" else b"")
    return kind, payload, rid


# ---------------------------------------------------------------------- checking replies


def _arm(response: Any) -> tuple[str, Any]:
    name, value = betterproto2.which_one_of(response, "kind")
    assert name, f"a reply with no kind arm set: {response!r}"
    return name, value


def _check_error(error: Any, *, env: bool) -> None:
    assert int(error.code) != 0, f"an error without a code: {error!r}"
    assert error.message, f"an error without a message: {error!r}"
    message = LANE_NAMED.sub("", error.message) if env else error.message
    assert not BUG_TEXT.match(message) or (env and message.startswith(ENV_FAILURE_PREFIXES)), (
        f"the server's catch-all for its own bugs answered: {error.message!r}"
    )
    if env and int(error.code) == int(env_pb.EnvErrorCode.INTERNAL):
        assert message.startswith(ENV_FAILURE_PREFIXES), error.message


async def _reply(stream: RawStream) -> bytes:
    with trio.fail_after(REPLY_TIMEOUT):
        return await stream.recv()


async def _expect_clean_end(stream: RawStream) -> None:
    with trio.fail_after(REPLY_TIMEOUT):
        leftovers, ended = await stream.drain()
    assert leftovers == [], "replies after the session ended"
    assert ended.status is Status.OK, ended


async def _env_exchange(address: str, requests: list[tuple[str, bytes, str]]) -> None:
    stream = await _open_env(address)
    try:
        for _kind, payload, rid in requests:
            await stream.send(payload)
            response = env_pb.JoinResponse.parse(await _reply(stream))
            assert response.request_id == rid
            name, body = _arm(response)
            if name == "error":
                _check_error(body, env=True)
                if not body.is_recoverable:
                    await _expect_clean_end(stream)
                    return
            if name == "close":
                await _expect_clean_end(stream)
                return
        # Only recoverable errors so far: the session still works.
        probe = env_pb.JoinRequest(
            request_id="probe", reset=env_pb.ResetRequest(seeds=[1], episode_ids=["probe"])
        )
        await stream.send(bytes(probe))
        response = env_pb.JoinResponse.parse(await _reply(stream))
        assert response.request_id == "probe"
        assert _arm(response)[0] == "reset", response
        await _expect_clean_end(stream)
    finally:
        await stream.close()


async def _open_env(address: str) -> RawStream:
    """Open an env Join, retrying while the previous client's slot is still being freed.

    The server claims the single slot before it sends the response headers, and
    refuses with FAILED_PRECONDITION instead of headers when it is taken.
    """
    with trio.fail_after(REPLY_TIMEOUT):
        while True:
            stream = RawStream(address, ENV_JOIN)
            await stream.open()
            try:
                await stream.headers()
            except StreamEnd as ended:
                assert ended.status is Status.FAILED_PRECONDITION, ended
                await stream.close()
                await trio.sleep(0.01)
                continue
            return stream


async def _env_serves_next_client(address: str, lanes: int = 1) -> None:
    stream = await _open_env(address)
    ids = [f"ok{i}" for i in range(lanes)]
    try:
        reset = env_pb.JoinRequest(
            request_id="r", reset=env_pb.ResetRequest(seeds=list(range(lanes)), episode_ids=ids)
        )
        await stream.send(bytes(reset))
        assert _arm(env_pb.JoinResponse.parse(await _reply(stream)))[0] == "reset"
        action = spaces.encode_batch(VALUE_SPEC, [VALID_VALUE] * lanes)
        step = env_pb.JoinRequest(
            request_id="s", step=env_pb.StepRequest(action=action, episode_ids=ids)
        )
        await stream.send(bytes(step))
        assert _arm(env_pb.JoinResponse.parse(await _reply(stream)))[0] == "step"
        await _expect_clean_end(stream)
    finally:
        await stream.close()


async def _model_exchange(address: str, requests: list[tuple[str, bytes, str]]) -> None:
    stream = RawStream(address, MODEL_JOIN)
    await stream.open()
    try:
        for _kind, payload, rid in requests:
            await stream.send(payload)
            response = model_pb.JoinResponse.parse(await _reply(stream))
            assert response.request_id == rid
            name, body = _arm(response)
            if name == "error":
                _check_error(body, env=False)
            elif name == "grouped_predict":
                for result in body.results:
                    outcome, value = betterproto2.which_one_of(result, "outcome")
                    assert outcome in ("response", "error"), result
                    if outcome == "error":
                        _check_error(value, env=False)
            elif name == "predict":
                assert body.actions, "a predict reply with no actions"
            if name == "close":
                await _expect_clean_end(stream)
                return
        # Model errors never end the stream: the session still works.
        await _model_probe(stream, "probe")
        await _expect_clean_end(stream)
    finally:
        await stream.close()


async def _model_probe(stream: RawStream, env_id: str) -> None:
    context = model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=f"{env_id}:r")
    resolve = model_pb.JoinRequest(
        request_id=f"{env_id}:r",
        resolve_adapter=model_pb.ResolveAdapterRequest(
            context=context,
            env_spec=core_pb.EnvSpec(
                id="Fuzz-v0",
                action_space=spaces.from_gymnasium(ACTION_SPACE_MODEL),
                observation_space=VALUE_SPEC,
            ),
            selected_workflow_edition=WORKFLOW_EDITION,
            execution_horizon=1,
        ),
    )
    await stream.send(bytes(resolve))
    assert _arm(model_pb.JoinResponse.parse(await _reply(stream)))[0] == "resolve_adapter"
    predict_context = model_pb.AdapterContext(
        session_id="s", env_id=env_id, request_id=f"{env_id}:p"
    )
    predict = model_pb.JoinRequest(
        request_id=f"{env_id}:p",
        predict=model_pb.PredictRequest(
            context=predict_context,
            observation=valid_value(1),
            episode_info=[model_pb.EpisodeInfo(episode_id="e1")],
        ),
    )
    await stream.send(bytes(predict))
    response = model_pb.JoinResponse.parse(await _reply(stream))
    name, body = _arm(response)
    assert name == "predict", response
    assert body.context == predict_context
    assert spaces.decode_batch(spaces.from_gymnasium(ACTION_SPACE_MODEL), body.actions[0], 1) == [0]


async def _model_serves_next_client(address: str) -> None:
    stream = RawStream(address, MODEL_JOIN)
    await stream.open()
    try:
        await _model_probe(stream, "next")
        await _expect_clean_end(stream)
    finally:
        await stream.close()


async def _pipelined(address: str, requests: list[tuple[str, bytes, str]], *, env: bool) -> None:
    """Send every request at once, half-close, then read everything the server sends.

    Each reply is typed and answers a request that was sent (ids may repeat, so they are
    counted); unless a reply ended the session, every request is answered; the stream
    then ends with status OK.
    """
    stream = await _open_env(address) if env else RawStream(address, MODEL_JOIN)
    if not env:
        await stream.open()
    parse = env_pb.JoinResponse.parse if env else model_pb.JoinResponse.parse
    sent = Counter(rid for _kind, _payload, rid in requests)
    answered: Counter[str] = Counter()
    session_ended = False
    try:
        for _kind, payload, _rid in requests:
            await stream.send(payload)
        with trio.fail_after(REPLY_TIMEOUT):
            replies, ended = await stream.drain()
        for data in replies:
            response = parse(data)
            answered[response.request_id] += 1
            name, body = _arm(response)
            if name == "error":
                _check_error(body, env=env)
                session_ended |= env and not body.is_recoverable
            session_ended |= name == "close"
        assert not answered - sent, f"replies to requests never sent: {answered - sent}"
        if not session_ended:
            assert answered == sent
        assert ended.status is Status.OK, ended
    finally:
        await stream.close()


def _in_trio(fn: Any, *args: Any, **kwargs: Any) -> None:
    async def main() -> None:
        async with asyncio_loop():
            await fn(*args, **kwargs)

    trio.run(main)


# ---------------------------------------------------------------------- the tests


@FUZZ
@given(requests=st.lists(env_request(), min_size=1, max_size=6))
def test_env_server_survives_random_join_traffic(
    env_server: ServerThread, requests: list[tuple[str, bytes, str]]
) -> None:
    _in_trio(_env_exchange, env_server.server.address, requests)
    assert env_server.alive
    _in_trio(_env_serves_next_client, env_server.server.address)


def _valid_resolve(env_id: str) -> tuple[str, bytes, str]:
    rid = f"{env_id}:resolve"
    message = model_pb.JoinRequest(
        request_id=rid,
        resolve_adapter=model_pb.ResolveAdapterRequest(
            context=model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=rid),
            env_spec=core_pb.EnvSpec(
                id="Fuzz-v0",
                action_space=spaces.from_gymnasium(ACTION_SPACE_MODEL),
                observation_space=VALUE_SPEC,
            ),
            selected_workflow_edition=WORKFLOW_EDITION,
        ),
    )
    return "resolve_adapter", bytes(message), rid


@FUZZ
@given(
    resolved=st.booleans(),
    requests=st.lists(model_request(), min_size=1, max_size=6),
)
def test_model_server_survives_random_join_traffic(
    model_server: ServerThread, resolved: bool, requests: list[tuple[str, bytes, str]]
) -> None:
    if resolved:  # so predicts reach the observation decoder, not just "not resolved"
        requests = [_valid_resolve("env-a"), _valid_resolve("env-b"), *requests]
    _in_trio(_model_exchange, model_server.server.address, requests)
    assert model_server.alive
    _in_trio(_model_serves_next_client, model_server.server.address)


@FUZZ
@given(requests=st.lists(env_request(), min_size=1, max_size=8))
def test_env_lanes_server_survives_pipelined_traffic(
    lanes_server: ServerThread, requests: list[tuple[str, bytes, str]]
) -> None:
    _in_trio(_pipelined, lanes_server.server.address, requests, env=True)
    assert lanes_server.alive
    _in_trio(_env_serves_next_client, lanes_server.server.address, lanes=2)


@FUZZ
@given(requests=st.lists(model_request(), min_size=1, max_size=8))
def test_model_server_survives_pipelined_traffic(
    model_server: ServerThread, requests: list[tuple[str, bytes, str]]
) -> None:
    requests = [_valid_resolve("env-a"), _valid_resolve("env-b"), *requests]
    _in_trio(_pipelined, model_server.server.address, requests, env=False)
    assert model_server.alive
    _in_trio(_model_serves_next_client, model_server.server.address)


@pytest.mark.parametrize("service", ["env", "model"])
def test_undecodable_envelope_ends_the_stream_not_the_server(
    service: str, env_server: ServerThread, model_server: ServerThread
) -> None:
    server, path = (env_server, ENV_JOIN) if service == "env" else (model_server, MODEL_JOIN)
    statuses: dict[str, Status] = {}

    async def exchange() -> None:
        stream = RawStream(server.server.address, path)
        await stream.open()
        try:
            await stream.send(GARBAGE_ENVELOPE)
            # No request id can be read, so no typed reply is possible: the stream ends
            # with a gRPC status saying why.
            with trio.fail_after(REPLY_TIMEOUT):
                with pytest.raises(StreamEnd) as ended:
                    await stream.recv()
            statuses[service] = ended.value.status
        finally:
            await stream.close()

    _in_trio(exchange)
    print(f"{service} server ended an undecodable Join: {statuses[service].name}")
    assert server.alive
    assert statuses[service] is Status.INVALID_ARGUMENT
    if service == "env":
        _in_trio(_env_serves_next_client, server.server.address)
    else:
        _in_trio(_model_serves_next_client, server.server.address)


def test_requests_before_configure_and_resolve(
    env_server: ServerThread, model_server: ServerThread
) -> None:
    """No configure/resolve first: the env steps anyway (0.1.0 semantics); the model refuses."""

    async def env_side() -> None:
        stream = await _open_env(env_server.server.address)
        try:
            step = env_pb.JoinRequest(
                request_id="early",
                step=env_pb.StepRequest(action=valid_value(1), episode_ids=["x"]),
            )
            await stream.send(bytes(step))
            response = env_pb.JoinResponse.parse(await _reply(stream))
            assert response.request_id == "early"
            name, body = _arm(response)
            if name == "error":
                _check_error(body, env=True)
                assert body.is_recoverable
            await _expect_clean_end(stream)
        finally:
            await stream.close()

    async def model_side() -> None:
        stream = RawStream(model_server.server.address, MODEL_JOIN)
        await stream.open()
        try:
            context = model_pb.AdapterContext(session_id="s", env_id="never", request_id="q")
            predict = model_pb.JoinRequest(
                request_id="q",
                predict=model_pb.PredictRequest(
                    context=context,
                    observation=valid_value(1),
                    episode_info=[model_pb.EpisodeInfo(episode_id="e1")],
                ),
            )
            await stream.send(bytes(predict))
            response = model_pb.JoinResponse.parse(await _reply(stream))
            assert response.request_id == "q"
            assert response.error is not None
            assert "not resolved" in response.error.message
            await _model_probe(stream, "never")  # the stream is still usable
            await _expect_clean_end(stream)
        finally:
            await stream.close()

    _in_trio(env_side)
    _in_trio(model_side)
    assert env_server.alive and model_server.alive
