"""gRPC clients (RemoteEnv, RemoteModel, check_health) against small grpclib fake servers.

The fakes cover what a real rlmesh server cannot be made to do: refuse the
protocol generation, omit the contract, answer out of order, die mid-request,
check a token. Interop with the real rlmesh 0.1.0 servers is in
``test_interop_clients.py``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpclib.const
import grpclib.server
import pytest
import trio
from grpclib.health.service import Health

from rlmesh_trio._errors import (
    ConnectError,
    EnvRpcError,
    HandshakeError,
    InvalidSpec,
    ModelRpcError,
)
from rlmesh_trio._protocol import PROTOCOL_GENERATION, core_pb, env_pb, model_pb, spaces_pb
from rlmesh_trio.transport._address import Address, parse_address
from rlmesh_trio.transport._handshake import local_peer_info
from rlmesh_trio.transport.client._health import check_health
from rlmesh_trio.transport.client._remote_env import RemoteEnv
from rlmesh_trio.transport.client._remote_model import RemoteModel

from .. import _asyncio_bridge as bridge
from .._raw_codec import RawCodec

pytestmark = pytest.mark.timeout(30)

Handler = Callable[[Any], Awaitable[None]]

# ---- address parsing -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:5555", Address(host="127.0.0.1", port=5555)),
        ("localhost:1", Address(host="localhost", port=1)),
        ("tcp://10.0.0.2:80", Address(host="10.0.0.2", port=80)),
        ("http://example.internal:6000/", Address(host="example.internal", port=6000)),
        ("5555", Address(host="127.0.0.1", port=5555)),
        (":5555", Address(host="127.0.0.1", port=5555)),
        ("[::1]:7000", Address(host="::1", port=7000)),
        ("unix:///tmp/env.sock", Address(path="/tmp/env.sock")),
        ("  TCP://h:9 ", Address(host="h", port=9)),
    ],
)
def test_parse_address_accepts_wire_spellings(text: str, expected: Address) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("https://h:443", "https"),
        ("unix://relative.sock", "absolute path"),
        ("grpc://h:1", "unsupported scheme"),
        ("h", "expected host:port"),
        ("h:port", "not a number"),
        ("h:70000", "out of range"),
        ("::1:5", "bracketed"),
        ("", "empty"),
        ("h:1/path", "no path"),
    ],
)
def test_parse_address_rejects_with_the_address_named(text: str, why: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_address(text)
    assert why in str(info.value)
    assert repr(text) in str(info.value)


def test_address_str_round_trips() -> None:
    for text in ("127.0.0.1:5", "[::1]:7000", "unix:///tmp/a.sock"):
        assert str(parse_address(text)) == text
        assert parse_address(str(parse_address(text))) == parse_address(text)


def test_bad_address_fails_at_construction() -> None:
    with pytest.raises(InvalidSpec, match="https"):
        RemoteEnv("https://secure:443")
    with pytest.raises(InvalidSpec):
        RemoteModel("nonsense")


def test_peer_info_describes_us() -> None:
    peer = local_peer_info("rlmesh-env")
    assert peer.component == "rlmesh-env"
    assert peer.language == "python"
    assert peer.package_version
    assert peer.extra["rlmesh.workflow.edition"] == "2026.06"


# ---- fake servers ----------------------------------------------------------


class FakeService:
    """A raw-bytes grpclib service: ``routes`` maps an RPC path to a handler(stream)."""

    def __init__(self, routes: dict[str, tuple[Handler, grpclib.const.Cardinality]]) -> None:
        self.routes = routes

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return {
            path: grpclib.const.Handler(fn, cardinality, bytes, bytes)
            for path, (fn, cardinality) in self.routes.items()
        }


@asynccontextmanager
async def serve_fake(
    *services: Any, raw: bool = True, path: str | None = None
) -> AsyncIterator[str]:
    """Run a grpclib server on the test's asyncio loop; yield its address."""
    async with bridge.asyncio_loop():
        server = await bridge.on_loop(
            grpclib.server.Server, list(services), codec=RawCodec() if raw else None
        )
        if path is not None:
            await bridge.call(server.start, path=path)
            address = f"unix://{path}"
        else:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            await bridge.call(server.start, sock=sock)
            address = f"127.0.0.1:{sock.getsockname()[1]}"
        try:
            yield address
        finally:
            await bridge.on_loop(server.close)
            with trio.move_on_after(5):
                await bridge.call(server.wait_closed)


UNARY = grpclib.const.Cardinality.UNARY_UNARY
BIDI = grpclib.const.Cardinality.STREAM_STREAM
ENV = "/rlmesh.env.v1.EnvService"
MODEL = "/rlmesh.model.v1.ModelService"


def cartpole_contract() -> core_pb.EnvContract:
    return core_pb.EnvContract(
        spec=core_pb.EnvSpec(
            id="Fake-v0",
            action_space=spaces_pb.SpaceSpec(
                dtype=spaces_pb.DataType.INT64, discrete=spaces_pb.DiscreteSpec(n=2)
            ),
            observation_space=spaces_pb.SpaceSpec(
                shape=[1], dtype=spaces_pb.DataType.FLOAT32, box=spaces_pb.BoxSpec(unbounded=True)
            ),
        ),
        num_envs=3,
        autoreset_mode=core_pb.AutoresetMode.DISABLED,
    )


def env_handshake(
    *, compatible: bool = True, contract: core_pb.EnvContract | None = None, error: str = ""
) -> Handler:
    async def handshake(stream: Any) -> None:
        request = env_pb.HandshakeRequest.parse(await stream.recv_message())
        assert request.base is not None
        assert request.base.protocol_generation == PROTOCOL_GENERATION
        base = core_pb.HandshakeResponse(
            compatible=compatible,
            supported_workflow_editions=["2026.06"],
            preferred_workflow_edition="2026.06",
            capabilities={"subset_step": "true"},
            error_message=error or None,
        )
        await stream.send_message(bytes(env_pb.HandshakeResponse(base=base, env_contract=contract)))

    return handshake


def lane_step_response(request: env_pb.JoinRequest) -> env_pb.JoinResponse:
    if request.configure is not None:
        return env_pb.JoinResponse(
            request_id=request.request_id, configure=env_pb.ConfigureEnvResponse()
        )
    lanes = list(request.step.env_indices) if request.step else []
    return env_pb.JoinResponse(
        request_id=request.request_id,
        endpoint_total_ns=2_000_000,
        user_ns=1_500_000,
        step=env_pb.StepResponse(rewards=[float(lanes[0])], env_indices=lanes),
    )


def join_reverse_order(batch: int) -> Handler:
    """A Join that acknowledges configure, then answers steps ``batch`` at a time, newest first."""

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        held: list[env_pb.JoinRequest] = []
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.configure is not None:
                await stream.send_message(bytes(lane_step_response(request)))
                continue
            held.append(request)
            if len(held) == batch:
                for late in reversed(held):
                    await stream.send_message(bytes(lane_step_response(late)))
                held.clear()

    return join


def step_request(lane: int) -> env_pb.StepRequest:
    action = spaces_pb.SpaceValue(leaves=[lane.to_bytes(8, "little")])
    return env_pb.StepRequest(action=action, env_indices=[lane], episode_ids=[f"e{lane}"])


# ---- handshake -------------------------------------------------------------


async def test_incompatible_generation_names_address_and_server_reason() -> None:
    reason = "protocol generation rlmesh-wire-v1 not compatible with server rlmesh-wire-v9"
    service = FakeService(
        {f"{ENV}/Handshake": (env_handshake(compatible=False, error=reason), UNARY)}
    )
    async with serve_fake(service) as address:
        env = RemoteEnv(address)
        with pytest.raises(HandshakeError) as info:
            await env.connect()
        await env.aclose()
    assert address in str(info.value)
    assert reason in str(info.value)


async def test_missing_contract_is_a_handshake_error() -> None:
    service = FakeService({f"{ENV}/Handshake": (env_handshake(contract=None), UNARY)})
    async with serve_fake(service) as address:
        env = RemoteEnv(address)
        with pytest.raises(HandshakeError, match="no env_contract"):
            await env.connect()
        await env.aclose()


async def test_contract_without_observation_space_is_refused() -> None:
    contract = cartpole_contract()
    assert contract.spec is not None
    contract.spec.observation_space = None
    service = FakeService({f"{ENV}/Handshake": (env_handshake(contract=contract), UNARY)})
    async with serve_fake(service) as address:
        env = RemoteEnv(address)
        with pytest.raises(HandshakeError, match="observation_space"):
            await env.connect()
        await env.aclose()


async def test_model_address_given_as_env_is_named_unimplemented() -> None:
    async def model_handshake(stream: Any) -> None:
        await stream.recv_message()
        base = core_pb.HandshakeResponse(compatible=True, supported_workflow_editions=["2026.06"])
        await stream.send_message(bytes(model_pb.HandshakeResponse(base=base)))

    service = FakeService({f"{MODEL}/Handshake": (model_handshake, UNARY)})
    async with serve_fake(service) as address:
        env = RemoteEnv(address)
        with pytest.raises(HandshakeError, match="UNIMPLEMENTED"):
            await env.connect()
        await env.aclose()
        async with RemoteModel(address) as model:
            info = await model.connect()
            assert info.editions == ("2026.06",)
            assert info.preferred_edition is None
            assert await model.connect() is info  # idempotent


async def test_refused_connection_is_a_connect_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    address = f"127.0.0.1:{port}"
    async with RemoteEnv(address, connect_timeout=5) as env:
        with pytest.raises(ConnectError) as info:
            await env.connect()
    assert address in str(info.value)
    assert "refused" in str(info.value)


async def test_silent_listener_times_out_as_connect_error() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts at the TCP level, never speaks HTTP/2
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        async with RemoteEnv(address, connect_timeout=0.3) as env:
            with pytest.raises(ConnectError, match="timed out"):
                await env.connect()
    finally:
        listener.close()


async def test_missing_unix_socket_is_a_connect_error(tmp_path: Path) -> None:
    address = f"unix://{tmp_path}/absent.sock"
    async with RemoteModel(address) as model:
        with pytest.raises(ConnectError, match=r"absent\.sock"):
            await model.connect()


# ---- Join demultiplexing and stream end -----------------------------------


async def test_lane_responses_out_of_order_reach_their_callers() -> None:
    service = FakeService(
        {
            f"{ENV}/Handshake": (env_handshake(contract=cartpole_contract()), UNARY),
            f"{ENV}/Join": (join_reverse_order(batch=3), BIDI),
        }
    )
    results: dict[int, env_pb.StepResponse] = {}
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        info = await env.connect()
        assert info.has_capability("subset_step")
        await env.configure("2026.06")

        async def lane(k: int) -> None:
            reply = await env.step(step_request(k))
            results[k] = reply.response
            assert reply.telemetry["endpoint.total"] == pytest.approx(2.0)
            assert reply.telemetry["endpoint.user"] == pytest.approx(1.5)
            assert "endpoint.decode" not in reply.telemetry  # unset fields are not reported
            assert reply.telemetry["request.bytes"] > 0

        async with trio.open_nursery() as nursery:
            for k in range(3):
                nursery.start_soon(lane, k)
    assert {k: list(r.env_indices) for k, r in results.items()} == {0: [0], 1: [1], 2: [2]}
    assert {k: r.rewards[0] for k, r in results.items()} == {0: 0.0, 1: 1.0, 2: 2.0}


async def test_request_ids_follow_the_grpc_req_sequence() -> None:
    seen: list[str] = []

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            seen.append(request.request_id)
            await stream.send_message(bytes(lane_step_response(request)))

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        await env.step(step_request(0))
        await env.step(step_request(1))
    assert seen == ["grpc-req-1", "grpc-req-2", "grpc-req-3"]


async def test_stream_ending_mid_request_is_connection_closed() -> None:
    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.configure is None:
                return  # end the stream (status OK) without answering
            await stream.send_message(bytes(lane_step_response(request)))

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        with pytest.raises(EnvRpcError) as info:
            await env.step(step_request(0))
        assert info.value.message == "transport error: connection closed"
        assert info.value.operation == "env.step"
        assert "If the source is 'transport error: connection closed'" in str(info.value)
        with pytest.raises(EnvRpcError, match="connection closed"):
            await env.step(step_request(0))  # the session stays dead


async def test_env_error_maps_code_and_recoverability() -> None:
    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.configure is not None:
                await stream.send_message(bytes(lane_step_response(request)))
                continue
            error = env_pb.EnvError(
                code=env_pb.EnvErrorCode.TIMEOUT,
                message="env.step timed out after 200ms",
                is_recoverable=True,
            )
            reply = env_pb.JoinResponse(request_id=request.request_id, error=error)
            await stream.send_message(bytes(reply))

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        with pytest.raises(EnvRpcError) as info:
            await env.step(step_request(0))
    assert info.value.code == int(env_pb.EnvErrorCode.TIMEOUT)
    assert info.value.recoverable is True
    assert info.value.message == "environment error: [Timeout] env.step timed out after 200ms"


async def test_second_join_refused_is_endpoint_in_use() -> None:
    async def join(stream: Any) -> None:
        raise grpclib.GRPCError(
            grpclib.const.Status.FAILED_PRECONDITION,
            "environment already has an active Join session; only one client may be "
            "connected at a time",
        )

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        with pytest.raises(ConnectError) as info:
            await env.configure("2026.06")
    assert address in str(info.value)
    assert "in use" in str(info.value)
    assert "already has an active Join session" in str(info.value)


async def test_token_is_sent_verbatim_as_authorization() -> None:
    tokens: list[str | None] = []

    async def handshake(stream: Any) -> None:
        tokens.append(stream.metadata.get("authorization"))
        if stream.metadata.get("authorization") != "s3cret":
            raise grpclib.GRPCError(grpclib.const.Status.UNAUTHENTICATED, "invalid env token")
        await env_handshake(contract=cartpole_contract())(stream)

    service = FakeService({f"{ENV}/Handshake": (handshake, UNARY)})
    async with serve_fake(service) as address:
        async with RemoteEnv(address, token="s3cret") as env:
            await env.connect()
        async with RemoteEnv(address) as env:
            with pytest.raises(ConnectError, match="UNAUTHENTICATED: invalid env token"):
                await env.connect()
    assert tokens == ["s3cret", None]


async def test_cancelled_env_step_tears_the_stream_down() -> None:
    release = trio.Event()

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.configure is not None:
                await stream.send_message(bytes(lane_step_response(request)))
            # steps are never answered

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        with trio.move_on_after(0.2) as scope:
            await env.step(step_request(0))
        assert scope.cancelled_caught
        with pytest.raises(EnvRpcError, match="connection closed"):
            await env.step(step_request(1))
    release.set()


def model_join(*, hold_first: trio.Event | None = None, mangle_env: bool = False) -> Handler:
    """A model Join answering predicts with action [0]; optionally never answers predict 1."""

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = model_pb.JoinRequest.parse(data)
            rid = request.request_id
            if request.predict is not None:
                held = request.predict.context is not None and (
                    request.predict.context.request_id.endswith(":predict:1")
                )
                if held and hold_first is not None:
                    # The client abandons this one; never answered. Held by its id, not by
                    # arrival order: under load the client may cancel it before it is sent.
                    continue
                context = request.predict.context
                if mangle_env and context is not None:
                    context = model_pb.AdapterContext(
                        session_id=context.session_id, env_id="other", request_id=context.request_id
                    )
                reply = model_pb.JoinResponse(
                    request_id=rid,
                    adapter_ns=300_000,
                    predict=model_pb.PredictResponse(
                        context=context,
                        actions=[spaces_pb.SpaceValue(leaves=[bytes(8)])],
                    ),
                )
            elif request.resolve_adapter is not None:
                reply = model_pb.JoinResponse(
                    request_id=rid, resolve_adapter=model_pb.ResolveAdapterResponse()
                )
            else:
                error = model_pb.ModelError(
                    code=model_pb.ModelErrorCode.UNSUPPORTED, message="nope", is_recoverable=True
                )
                reply = model_pb.JoinResponse(request_id=rid, error=error)
            await stream.send_message(bytes(reply))

    return join


def predict_request(env_id: str, n: int) -> model_pb.PredictRequest:
    return model_pb.PredictRequest(
        context=model_pb.AdapterContext(
            session_id="s", env_id=env_id, request_id=f"{env_id}:predict:{n}"
        ),
        observation=spaces_pb.SpaceValue(leaves=[bytes(4)]),
        episode_info=[model_pb.EpisodeInfo(episode_id=f"{env_id}-e")],
    )


async def test_cancelled_predict_abandons_only_that_request() -> None:
    service = FakeService({f"{MODEL}/Join": (model_join(hold_first=trio.Event()), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:
        with trio.move_on_after(0.2) as scope:
            await model.predict(predict_request("a", 1))
        assert scope.cancelled_caught
        reply = await model.predict(predict_request("a", 2))  # the shared stream survived
        assert reply.response.actions[0].leaves == [bytes(8)]
        assert reply.telemetry["endpoint.adapter"] == pytest.approx(0.3)


async def test_model_error_and_a_reply_with_another_context() -> None:
    service = FakeService({f"{MODEL}/Join": (model_join(mangle_env=True), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:
        # The client hands the reply back as sent; the route checks it (RouteCalls.predict,
        # the one check every model goes through: tests/runtime, tests/orchestrator/test_faults).
        reply = await model.predict(predict_request("a", 1))
        assert reply.response.context is not None
        assert reply.response.context.env_id == "other"
        reset = model_pb.ResetAdapterRequest(
            context=model_pb.AdapterContext(env_id="a", request_id="a:reset_adapter:2")
        )
        with pytest.raises(ModelRpcError) as info:
            await model.reset_adapter(reset)
    assert info.value.component_id == address
    assert info.value.code == int(model_pb.ModelErrorCode.UNSUPPORTED)
    assert info.value.recoverable is True
    assert info.value.message == "model error: [Unsupported] nope"


async def test_unix_socket_endpoint(tmp_path: Path) -> None:
    service = FakeService({f"{MODEL}/Join": (model_join(), BIDI)})
    async with (
        serve_fake(service, path=str(tmp_path / "model.sock")) as address,
        RemoteModel(address) as model,
    ):
        reply = await model.predict(predict_request("u", 1))
    assert reply.response.context.env_id == "u"


# ---- health ----------------------------------------------------------------


async def test_check_health_serving_and_unimplemented() -> None:
    async with serve_fake(Health(), raw=False) as address:  # protobuf codec for health
        assert await check_health(address) == "SERVING"
    service = FakeService(
        {f"{ENV}/Handshake": (env_handshake(contract=cartpole_contract()), UNARY)}
    )
    async with serve_fake(service) as address:
        assert await check_health(address) is None


async def test_check_health_unreachable() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(ConnectError, match="refused"):
        await check_health(f"127.0.0.1:{port}", timeout=5)


# ---- lifecycle -------------------------------------------------------------


async def test_aclose_is_idempotent_and_safe_when_cancelled() -> None:
    service = FakeService({f"{ENV}/Join": (join_reverse_order(batch=1), BIDI)})
    async with serve_fake(service) as address:
        env = RemoteEnv(address)
        await env.configure("2026.06")
        with trio.CancelScope() as scope:
            scope.cancel()
            with trio.CancelScope(shield=True):
                await env.aclose()
        await env.aclose()
        with pytest.raises(EnvRpcError, match="connection closed"):
            await env.step(step_request(0))
        # a new client on the same endpoint configures and steps normally
        async with RemoteEnv(address) as again:
            await again.configure("2026.06")
            reply = await again.step(step_request(2))
            assert list(reply.response.env_indices) == [2]


def test_connect_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        RemoteEnv("127.0.0.1:1", connect_timeout=0)


async def test_large_and_small_messages_interleave_correctly() -> None:
    """Messages over one DATA frame go through the writer task, small ones may be written
    directly; concurrent mixes must arrive whole and in order."""

    async def echo_join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = model_pb.JoinRequest.parse(data)
            assert request.predict is not None
            reply = model_pb.JoinResponse(
                request_id=request.request_id,
                predict=model_pb.PredictResponse(
                    context=request.predict.context, actions=[request.predict.observation]
                ),
            )
            await stream.send_message(bytes(reply))

    sizes = [3 * 1024 * 1024, 10, 200_000, 7, 64 * 1024, 1]
    service = FakeService({f"{MODEL}/Join": (echo_join, BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:

        async def one(i: int, size: int) -> None:
            request = predict_request(f"r{i}", 1)
            request.observation = spaces_pb.SpaceValue(leaves=[bytes([i]) * size])
            reply = await model.predict(request)
            assert reply.response.actions[0].leaves == [bytes([i]) * size]
            assert reply.telemetry["response.bytes"] > size

        async with trio.open_nursery() as nursery:
            for i, size in enumerate(sizes):
                nursery.start_soon(one, i, size)


async def test_oversized_message_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlmesh_trio._errors import ProtocolError
    from rlmesh_trio._wire import _grpc

    monkeypatch.setattr(_grpc, "MAX_MESSAGE_BYTES", 1000)
    service = FakeService({f"{MODEL}/Join": (model_join(), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:
        request = predict_request("big", 1)
        request.observation = spaces_pb.SpaceValue(leaves=[bytes(2000)])
        with pytest.raises(ProtocolError, match="256 MiB"):
            await model.predict(request)
        await model.predict(predict_request("big", 2))  # the stream is still fine


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (needs the openssl command)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_with_a_caller_ssl_context(tls_files: tuple[Path, Path]) -> None:
    import ssl

    cert, key = tls_files
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server_ctx.set_alpn_protocols(["h2"])
    client_ctx = ssl.create_default_context(cafile=str(cert))  # no ALPN set by the caller

    service = FakeService({f"{MODEL}/Join": (model_join(), BIDI)})
    async with bridge.asyncio_loop():
        server = await bridge.on_loop(grpclib.server.Server, [service], codec=RawCodec())
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await bridge.call(server.start, sock=sock, ssl=server_ctx)
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        try:
            async with RemoteModel(address, ssl=client_ctx) as model:
                reply = await model.predict(predict_request("tls", 1))
                assert reply.response.context.env_id == "tls"
            async with RemoteModel(address) as plain:  # plaintext against a TLS server
                with pytest.raises((ModelRpcError, ConnectError)):
                    with trio.fail_after(5):
                        await plain.predict(predict_request("tls", 2))
        finally:
            await bridge.on_loop(server.close)
            with trio.move_on_after(5):
                await bridge.call(server.wait_closed)


async def test_undecodable_response_ends_the_session_with_a_reason() -> None:
    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for _data in stream:
            await stream.send_message(b"\x0a\x05\x0a")  # truncated: not a JoinResponse

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        with pytest.raises(ConnectError, match="undecodable Join response"):
            await env.configure("2026.06")
