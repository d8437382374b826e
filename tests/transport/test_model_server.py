"""ModelServer over real loopback gRPC, driven with the generated ModelServiceStub."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpclib.const
import gymnasium as gym
import numpy as np
import pytest
import trio
from grpclib import GRPCError
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

from rlmesh_trio import InvalidSpec, serve_model, spaces
from rlmesh_trio._protocol import CAP_CONCURRENT_PREDICT, core_pb
from rlmesh_trio.inprocess._demo_policy import CARTPOLE_POLICY, cartpole_policy
from rlmesh_trio.transport._address import parse_address
from rlmesh_trio.transport.server._model_server import ModelServer

from .. import _asyncio_bridge as _bridge
from .._grpc_services import model_pb
from .._waits import threads_ended

ENV = gym.make("CartPole-v1")
SPEC = core_pb.EnvSpec(
    id="CartPole-v1",
    observation_space=spaces.from_gymnasium(ENV.observation_space),
    action_space=spaces.from_gymnasium(ENV.action_space),
)
JOIN = "/rlmesh.model.v1.ModelService/Join"


def channel_for(address: str) -> Channel:
    if address.startswith("unix://"):
        return Channel(path=address[len("unix://") :])
    host, port = address.rsplit(":", 1)
    return Channel(host, int(port))


async def on_asyncio(address: str, fn: Callable[[Channel], Any], **metadata: str) -> Any:
    """Run ``fn(channel)`` on the asyncio side of the bridge; close the channel after."""

    async def body() -> Any:
        channel = channel_for(address)
        try:
            return await fn(channel)
        finally:
            channel.close()

    return await _bridge.call(body)


def ctx(env_id: str, request_id: str) -> Any:
    return model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=request_id)


def resolve(env_id: str, request_id: str | None = None) -> Any:
    rid = request_id or f"{env_id}:resolve_adapter"
    return model_pb.JoinRequest(
        request_id=rid,
        resolve_adapter=model_pb.ResolveAdapterRequest(
            context=ctx(env_id, rid), env_spec=SPEC, selected_workflow_edition="2026.06"
        ),
    )


def predict(env_id: str, request_id: str, thetas: tuple[float, ...] = (0.1,)) -> Any:
    obs = np.zeros((len(thetas), 4), np.float32)
    obs[:, 2] = thetas
    body = model_pb.PredictRequest(
        context=ctx(env_id, request_id),
        observation=spaces.encode_stacked(SPEC.observation_space, obs, len(thetas)),
        episode_info=[model_pb.EpisodeInfo(episode_id=f"ep{i}") for i in range(len(thetas))],
    )
    return model_pb.JoinRequest(request_id=request_id, predict=body)


def actions_of(response: Any, rows: int = 1) -> list[int]:
    assert response.predict is not None, response
    assert len(response.predict.actions) == 1
    return spaces.decode_batch(SPEC.action_space, response.predict.actions[0], rows)


async def exchange(
    address: str,
    requests: list[Any],
    expect: int | None = None,
    *,
    pipelined: bool = False,
    metadata: dict[str, str] | None = None,
) -> tuple[list[Any], Any]:
    """Send requests on one Join stream; collect responses until ``expect`` or stream end.

    Returns (responses, final status-or-None). Lock-step unless ``pipelined``.
    """
    want = len(requests) if expect is None else expect

    async def body(channel: Channel) -> tuple[list[Any], Any]:
        responses: list[Any] = []
        async with channel.request(
            JOIN,
            grpclib.const.Cardinality.STREAM_STREAM,
            model_pb.JoinRequest,
            model_pb.JoinResponse,
            metadata=metadata,
        ) as stream:
            if pipelined:
                for request in requests:
                    await stream.send_message(request)
            for request in requests if not pipelined else []:
                await stream.send_message(request)
                message = await stream.recv_message()
                if message is None:
                    break
                responses.append(message)
            while len(responses) < want:
                message = await stream.recv_message()
                if message is None:
                    break
                responses.append(message)
            await stream.end()
            tail = await stream.recv_message()
            return responses, tail

    return await on_asyncio(address, body)


@asynccontextmanager
async def served(policy_obj: Any = cartpole_policy, **options: Any) -> AsyncIterator[ModelServer]:
    async with serve_model(policy_obj, "127.0.0.1:0", **options) as server:
        yield server


# ---------------------------------------------------------------------- handshake, shutdown, health


async def handshake(address: str, base: Any) -> Any:
    async def body(channel: Channel) -> Any:
        return await model_pb.ModelServiceStub(channel).handshake(
            model_pb.HandshakeRequest(base=base)
        )

    return await on_asyncio(address, body)


async def test_handshake_reports_generation_editions_and_capabilities() -> None:
    async with served() as server:
        ok = await handshake(
            server.address,
            core_pb.HandshakeRequest(
                protocol_generation=" rlmesh-wire-v1 ", supported_workflow_editions=["2026.06"]
            ),
        )
        base = ok.base
        assert base.compatible and base.error_message is None
        assert base.supported_workflow_editions == ["2026.06"]
        assert base.preferred_workflow_edition == "2026.06"
        assert base.capabilities == {CAP_CONCURRENT_PREDICT: "true"}
        assert base.peer_info.component == "rlmesh-model"

        bad = await handshake(server.address, core_pb.HandshakeRequest(protocol_generation="v0"))
        assert not bad.base.compatible
        assert bad.base.error_message == (
            "protocol generation v0 not compatible with server rlmesh-wire-v1"
        )
        assert bad.base.supported_workflow_editions == ["2026.06"]

        with pytest.raises(GRPCError) as info:
            await handshake(server.address, None)
        assert info.value.status == Status.INVALID_ARGUMENT
        assert info.value.message == "handshake request missing base"


async def shutdown(address: str, base: Any) -> Any:
    async def body(channel: Channel) -> Any:
        return await model_pb.ModelServiceStub(channel).shutdown(
            model_pb.ShutdownRequest(base=base)
        )

    return await on_asyncio(address, body)


async def test_remote_shutdown_is_off_by_default() -> None:
    async with served() as server:
        reply = await shutdown(server.address, core_pb.ShutdownRequest(reason="please"))
        assert not reply.base.accepted
        assert reply.base.message == "remote shutdown is disabled for this model endpoint"
        with pytest.raises(GRPCError) as info:
            await shutdown(server.address, None)
        assert (info.value.status, info.value.message) == (
            Status.INVALID_ARGUMENT,
            "shutdown request missing base",
        )


async def test_remote_shutdown_when_allowed_stops_the_server() -> None:
    server = ModelServer(cartpole_policy, allow_remote_shutdown=True)
    async with _bridge.asyncio_loop(), trio.open_nursery() as nursery:
        await nursery.start(server.run)
        reply = await shutdown(server.address, core_pb.ShutdownRequest(reason="owner"))
        assert reply.base.accepted and reply.base.message == "shutdown accepted: owner"
        # run() returns by itself; the nursery then exits without being cancelled.
    assert server.shutdown_reason == "owner"


async def test_remote_shutdown_under_serve_model_ends_its_thread_while_the_body_runs() -> None:
    import threading

    def alive() -> bool:
        return any(t.name == "rlmesh-trio-model-server" for t in threading.enumerate())

    async with served(allow_remote_shutdown=True) as server:
        assert alive()
        reply = await shutdown(server.address, core_pb.ShutdownRequest(reason="owner"))
        assert reply.base.accepted
        # The server stops by itself; the body carries on.
        assert await threads_ended({"rlmesh-trio-model-server"}, 5.0)
        assert server.shutdown_reason == "owner"


async def test_health_service_reports_serving_for_the_server_only() -> None:
    async with served() as server:

        async def body(channel: Channel) -> Any:
            stub = HealthStub(channel)
            overall = await stub.Check(HealthCheckRequest(service=""))
            try:
                await stub.Check(HealthCheckRequest(service="other"))
            except GRPCError as exc:
                return overall, exc.status
            return overall, None

        overall, other = await on_asyncio(server.address, body)
        assert overall.status == HealthCheckResponse.SERVING
        assert other == Status.NOT_FOUND


# ---------------------------------------------------------------------- Join


async def test_join_sends_headers_before_any_request() -> None:
    # Pitfall 1: 0.1.0 clients wait for the response headers before their first message.
    async with served() as server:

        async def body(channel: Channel) -> Any:
            async with channel.request(
                JOIN,
                grpclib.const.Cardinality.STREAM_STREAM,
                model_pb.JoinRequest,
                model_pb.JoinResponse,
            ) as stream:
                await stream.send_request()
                await stream.recv_initial_metadata()
                got = stream.initial_metadata
                await stream.end()
                return got

        with trio.fail_after(10):
            assert await on_asyncio(server.address, body) is not None


async def test_join_flow_echoes_ids_and_answers_every_kind() -> None:
    async with served(CARTPOLE_POLICY) as server:
        requests = [
            resolve("e1"),
            predict("e1", "e1:predict:1", (0.1,)),
            predict("e1", "e1:predict:2", (0.1, -0.2, 0.3)),
            model_pb.JoinRequest(
                request_id="g",
                grouped_predict=model_pb.GroupedPredictRequest(
                    groups=[predict("e1", "g1").predict, predict("nope", "g2").predict]
                ),
            ),
            model_pb.JoinRequest(
                request_id="e1:reset_adapter:3",
                reset_adapter=model_pb.ResetAdapterRequest(
                    context=ctx("e1", "e1:reset_adapter:3"), episode_ids=["ep0"]
                ),
            ),
            model_pb.JoinRequest(request_id="weird"),
            model_pb.JoinRequest(
                request_id="e1:release_adapter",
                release_adapter=model_pb.ReleaseAdapterRequest(
                    context=ctx("e1", "e1:release_adapter"), reason="done"
                ),
            ),
            predict("e1", "e1:predict:4"),
        ]
        responses, tail = await exchange(server.address, requests)
    assert [r.request_id for r in responses] == [r.request_id for r in requests]
    assert tail is None
    assert responses[0].resolve_adapter is not None
    assert actions_of(responses[1]) == [1]
    assert actions_of(responses[2], 3) == [1, 0, 1]
    assert responses[2].predict.context == requests[2].predict.context
    results = responses[3].grouped_predict.results
    assert results[0].response is not None
    assert results[1].error.message == "model error: model env adapter was not resolved"
    assert responses[4].reset_adapter is not None
    assert responses[5].error.code == model_pb.ModelErrorCode.UNSUPPORTED
    assert responses[5].error.is_recoverable
    assert responses[6].release_adapter is not None
    assert responses[7].error.message == "model error: model env adapter was not resolved"
    assert all(r.endpoint_total_ns for r in responses)


async def test_policy_exception_is_a_model_error_and_the_stream_goes_on() -> None:
    def broken(obs: Any) -> int:
        raise ZeroDivisionError("no pole")

    async with served(broken) as server:
        responses, _ = await exchange(
            server.address, [resolve("e1"), predict("e1", "p1"), predict("e1", "p2")]
        )
    for response in responses[1:]:
        assert response.error.code == model_pb.ModelErrorCode.INTERNAL
        assert response.error.message == "internal error: ZeroDivisionError: no pole"
        assert not response.error.is_recoverable


async def test_adapters_are_shared_across_streams_and_close_releases_them_all() -> None:
    async with served() as server:
        first, _ = await exchange(server.address, [resolve("a"), resolve("b")])
        assert all(r.resolve_adapter is not None for r in first)
        used, _ = await exchange(server.address, [predict("a", "pa")])
        assert actions_of(used[0]) == [1]
        closing = [
            model_pb.JoinRequest(request_id="c", close=model_pb.CloseParticipantRequest()),
            predict("a", "after-close"),  # never answered: Close ends the stream
        ]
        closed, tail = await exchange(server.address, closing, expect=2, pipelined=True)
        assert [r.request_id for r in closed] == ["c"] and closed[0].close is not None
        assert tail is None
        assert not server._host.adapters
        later, _ = await exchange(server.address, [predict("b", "pb")])
        assert later[0].error.message == "model error: model env adapter was not resolved"


async def test_async_policy_runs_concurrently_in_completion_order_keeping_env_order() -> None:
    order: list[str] = []
    # Made by the first call, in the server's own Trio run: a's rows wait until both of
    # b's are done (a server running policies one at a time would time out here).
    b_done: list[trio.Event] = []

    async def slow_for_a(obs: Any) -> int:
        if not b_done:
            b_done.append(trio.Event())
        # Rows for env "a" carry theta 0.1, for env "b" theta -0.1.
        is_a = float(obs[2]) > 0
        if is_a:
            with trio.fail_after(10):
                await b_done[0].wait()
        order.append("a" if is_a else "b")
        if order.count("b") == 2:
            b_done[0].set()
        return 1 if is_a else 0

    async with served(slow_for_a) as server:
        requests = [
            resolve("a"),
            resolve("b"),
            predict("a", "a1", (0.1,)),
            predict("a", "a2", (0.1,)),
            predict("b", "b1", (-0.1,)),
            predict("b", "b2", (-0.1,)),
        ]
        responses, _ = await exchange(server.address, requests, pipelined=True)
    ids = [r.request_id for r in responses]
    assert sorted(ids) == sorted(r.request_id for r in requests)
    # b's requests overtook a's slow ones, but each env kept its own order.
    assert ids.index("b2") < ids.index("a1")
    assert ids.index("a1") < ids.index("a2") and ids.index("b1") < ids.index("b2")
    assert order == ["b", "b", "a", "a"]


async def test_threaded_policies_run_off_the_event_loop() -> None:
    import threading

    names: list[str] = []

    def record(obs: Any) -> int:
        names.append(threading.current_thread().name)
        return cartpole_policy(obs)

    async with served(record, threaded=True) as server:
        responses, _ = await exchange(
            server.address, [resolve("e1"), predict("e1", "p1"), predict("e1", "p2")]
        )
    assert [actions_of(r) for r in responses[1:]] == [[1], [1]]
    assert names and threading.main_thread().name not in names


async def test_bearer_token_is_required_when_configured() -> None:
    async with served(token="s3cret") as server:
        with pytest.raises(GRPCError) as info:
            await exchange(server.address, [resolve("e1")])
        assert info.value.status == Status.UNAUTHENTICATED
        with pytest.raises(GRPCError):
            await exchange(server.address, [resolve("e1")], metadata={"authorization": "nope"})
        ok, _ = await exchange(
            server.address, [resolve("e1")], metadata={"authorization": "s3cret"}
        )
        assert ok[0].resolve_adapter is not None

        async def health(channel: Channel) -> Any:
            return await HealthStub(channel).Check(HealthCheckRequest(service=""))

        assert (await on_asyncio(server.address, health)).status == HealthCheckResponse.SERVING


async def test_unix_socket_address(tmp_path: Any) -> None:
    path = tmp_path / "model.sock"
    async with serve_model(cartpole_policy, f"unix://{path}") as server:
        assert server.address == f"unix://{path}"
        responses, _ = await exchange(server.address, [resolve("e1"), predict("e1", "p")])
        assert actions_of(responses[1]) == [1]
    assert not path.exists()


def test_bind_address_forms() -> None:
    """Both servers parse their bind address with the clients' parser (one set of forms)."""
    assert parse_address("127.0.0.1:0").port == 0
    assert parse_address("tcp://127.0.0.1:5").host == "127.0.0.1"
    assert parse_address("http://localhost:7").host == "localhost"
    assert parse_address(":9").host == "127.0.0.1"
    assert parse_address("9").port == 9
    assert parse_address("unix:///tmp/x.sock").path == "/tmp/x.sock"
    assert parse_address("[::1]:4").host == "::1"
    for bad in ("https://h:1", "unix://relative", "h:notaport", "h:70000"):
        with pytest.raises(InvalidSpec):
            parse_address(bad)
        with pytest.raises(InvalidSpec):
            ModelServer(lambda obs: 0, bad)


async def test_remote_model_client_against_our_server() -> None:
    remote = pytest.importorskip("rlmesh_trio.transport.client._remote_model")
    async with served(CARTPOLE_POLICY) as server:
        model = remote.RemoteModel(server.address)
        try:
            info = await model.connect()
            assert info.has_capability(CAP_CONCURRENT_PREDICT)
            await model.resolve_adapter(resolve("e1").resolve_adapter)
            reply = await model.predict(predict("e1", "e1:predict:1", (0.1, -0.1)).predict)
            assert spaces.decode_batch(SPEC.action_space, reply.response.actions[0], 2) == [1, 0]
            await model.release_adapter(
                model_pb.ReleaseAdapterRequest(context=ctx("e1", "e1:release_adapter")), 5.0
            )
        finally:
            await model.aclose()


SERVE_SCRIPT = """
import sys
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.transport.server._model_server import ModelServer

threaded, shutdown = sys.argv[2] == "threaded", sys.argv[3] == "shutdown"
server = ModelServer(
    cartpole_policy, "127.0.0.1:0", threaded=threaded, allow_remote_shutdown=shutdown
)
server.serve(ready_fd=int(sys.argv[1]))
print("stopped:", server.shutdown_reason)
"""


@pytest.mark.parametrize(
    ("mode", "stop"),
    [("inline", "sigterm"), ("threaded", "sigterm"), ("inline", "shutdown")],
)
async def test_blocking_serve_reports_readiness_and_stops_cleanly(mode: str, stop: str) -> None:
    """Inline policies are served from a plain asyncio loop, threaded ones from Trio:
    both report readiness on the fd and stop cleanly on SIGTERM or an accepted Shutdown."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_SCRIPT, str(write_fd), mode, stop],
        pass_fds=(write_fd,),
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as ready:
            line = await trio.to_thread.run_sync(ready.readline)
        assert line.startswith("tcp://127.0.0.1:") and line.endswith("\n")
        address = line.strip().removeprefix("tcp://")
        async with _bridge.asyncio_loop():
            reply = await handshake(
                address, core_pb.HandshakeRequest(protocol_generation="rlmesh-wire-v1")
            )
            assert reply.base.compatible
            responses, _ = await exchange(address, [resolve("e1"), predict("e1", "p1")])
            assert actions_of(responses[1]) == [1]
            if stop == "shutdown":
                answer = await shutdown(address, core_pb.ShutdownRequest(reason="done"))
                assert answer.base.accepted
            else:
                proc.terminate()
        out, _ = await trio.to_thread.run_sync(proc.communicate, None, 20)
        assert proc.returncode == 0
        assert out.strip() == ("stopped: done" if stop == "shutdown" else "stopped: signal SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_close_waits_for_outstanding_requests_in_concurrent_mode() -> None:
    async def slow(obs: Any) -> int:
        await trio.sleep(0.1)  # outstanding for a while: what close must wait for
        return cartpole_policy(obs)

    async with served(slow) as server:
        requests = [
            resolve("e1"),
            predict("e1", "p1"),
            predict("e1", "p2"),
            model_pb.JoinRequest(request_id="bye", close=model_pb.CloseParticipantRequest()),
        ]
        responses, tail = await exchange(server.address, requests, pipelined=True)
        assert [r.request_id for r in responses] == ["e1:resolve_adapter", "p1", "p2", "bye"]
        assert [actions_of(r) for r in responses[1:3]] == [[1], [1]]
        assert responses[3].close is not None and tail is None
        assert not server._host.adapters


async def test_many_join_streams_at_once() -> None:
    async with served(CARTPOLE_POLICY) as server:
        results: dict[str, list[Any]] = {}

        async def one_route(env_id: str) -> None:
            requests = [resolve(env_id)] + [
                predict(env_id, f"{env_id}:predict:{n}", (0.1 if n % 2 else -0.1,))
                for n in range(1, 21)
            ]
            results[env_id], _ = await exchange(server.address, requests)

        async with trio.open_nursery() as nursery:
            for index in range(4):
                nursery.start_soon(one_route, f"env{index}")
    for env_id, responses in results.items():
        assert [r.request_id for r in responses][1:] == [
            f"{env_id}:predict:{n}" for n in range(1, 21)
        ]
        assert [actions_of(r)[0] for r in responses[1:]] == [1, 0] * 10
