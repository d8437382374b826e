"""EnvServer over real loopback gRPC: handshake, Join mechanics, lanes, shutdown, health, auth."""

from __future__ import annotations

import struct
import threading

import betterproto2
import gymnasium as gym
import pytest
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

from rlmesh_trio import serve_env, spaces
from rlmesh_trio._protocol import CAP_MULTI_LANE_SUBSET, core_pb, env_pb, spaces_pb
from rlmesh_trio.transport.server._env_server import BUSY_MESSAGE, EnvServer

from .. import _asyncio_bridge as bridge
from .._env_raw_client import RawJoin, handshake, rpc_once_free, unary
from .._envhost_envs import CountingEnv, Gate
from .._waits import threads_ended

SERVER_THREAD = "rlmesh-trio-env-server"

Code = env_pb.EnvErrorCode


def act(*values: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[b"".join(struct.pack("<q", v) for v in values)])


def kind(response: env_pb.JoinResponse) -> str:
    return betterproto2.which_one_of(response, "kind")[0]


async def test_handshake_contract_and_generation_check() -> None:
    async with serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as server:
        assert server.address.startswith("127.0.0.1:") and not server.address.endswith(":0")
        reply = await handshake(server.address)
        base = reply.base
        assert base.compatible and base.supported_workflow_editions == ["2026.06"]
        assert base.capabilities == {"subset_step": "true", CAP_MULTI_LANE_SUBSET: "true"}
        assert base.peer_info.component == "rlmesh-env"
        assert reply.env_contract.spec.id == "CartPole-v1"
        assert reply.env_contract.num_envs == 1
        padded = await handshake(server.address, " rlmesh-wire-v1 ")
        assert padded.base.compatible
        old = await handshake(server.address, "rlmesh-wire-v0")
        assert not old.base.compatible and old.env_contract is None
        assert old.base.error_message == (
            "protocol generation rlmesh-wire-v0 not compatible with server rlmesh-wire-v1"
        )
        assert old.base.supported_workflow_editions == ["2026.06"]
        with pytest.raises(GRPCError) as missing:
            await unary(
                server.address, "Handshake", env_pb.HandshakeRequest(), env_pb.HandshakeResponse
            )
        assert missing.value.status is Status.INVALID_ARGUMENT
        assert missing.value.message == "handshake request missing base"


async def test_join_headers_ids_timing_and_close_ends_stream() -> None:
    async with serve_env(CountingEnv(done_at=2), "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        # Headers arrive before we send anything (0.1.0 clients wait for them).
        with trio.fail_after(5):
            await join.headers()
        configure = await join.rpc(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition="2026.06")
        )
        assert kind(configure) == "configure" and configure.request_id == "grpc-req-1"
        assert configure.endpoint_total_ns is not None and configure.endpoint_total_ns > 0
        reset = await join.rpc(reset=env_pb.ResetRequest(seeds=[3], episode_ids=["e1"]))
        assert reset.request_id == "grpc-req-2" and kind(reset) == "reset"
        bad = await join.rpc(step=env_pb.StepRequest(action=act(9)))
        assert bad.error.code == Code.INVALID_ACTION and bad.error.is_recoverable
        assert bad.request_id == "grpc-req-3" and bad.endpoint_total_ns is not None
        await join.rpc(step=env_pb.StepRequest(action=act(1)))
        done = await join.rpc(step=env_pb.StepRequest(action=act(1)))
        # The additive timing fields 0.1.0 runtimes turn into endpoint.* telemetry.
        assert done.user_ns > 0 and done.decode_ns > 0 and done.encode_ns > 0
        assert done.endpoint_total_ns >= done.user_ns
        (episode,) = done.step.completed_episodes
        assert (episode.episode_id, episode.seed, episode.step_count) == ("e1", 3, 2)
        await join.rpc(reset=env_pb.ResetRequest(episode_ids=["e2"]))
        close = await join.rpc(close=env_pb.CloseEnvsRequest(reason="client close"))
        assert [e.episode_id for e in close.close.final_episodes] == ["e2"]
        assert await join.recv() is None  # the server ended the stream
        await join.trailers()  # grpclib raises GRPCError here for any status but OK
        await join.close()
        # Close ends the session, not the server: a new Join works.
        again = RawJoin(server.address)
        await again.open()
        assert kind(await again.rpc(reset=env_pb.ResetRequest())) == "reset"
        await again.close()


async def test_second_join_is_refused_until_the_first_ends() -> None:
    async with serve_env(CountingEnv(), "127.0.0.1:0") as server:
        first = RawJoin(server.address)
        await first.open()
        await first.rpc(reset=env_pb.ResetRequest())
        second = RawJoin(server.address)
        await second.open()
        with pytest.raises(GRPCError) as refused:
            await second.recv()
        assert refused.value.status is Status.FAILED_PRECONDITION
        assert refused.value.message == BUSY_MESSAGE
        await second.close()
        await first.half_close()
        assert await first.recv() is None
        await first.close()
        # The slot frees once the first stream's handler has returned.
        third, response = await rpc_once_free(server.address, reset=env_pb.ResetRequest())
        assert kind(response) == "reset"
        await third.close()


async def test_fatal_env_error_ends_the_stream() -> None:
    env = CountingEnv()
    async with serve_env(env, "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        await join.rpc(reset=env_pb.ResetRequest())
        env.fail_with = ValueError("bad physics")
        failed = await join.rpc(step=env_pb.StepRequest(action=act(1)))
        assert failed.error.code == Code.INTERNAL and not failed.error.is_recoverable
        assert failed.error.message == "step failed: ValueError: bad physics"
        assert await join.recv() is None
        await join.close()


async def test_unknown_kind_and_edition_pin() -> None:
    async with serve_env(CountingEnv(), "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        unknown = await join.rpc()
        assert unknown.error.code == Code.UNSUPPORTED and unknown.error.is_recoverable
        pinned = await join.rpc(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition="2030.01")
        )
        assert pinned.error.code == Code.INVALID_ACTION and not pinned.error.is_recoverable
        assert await join.recv() is None
        await join.close()


async def test_lanes_answer_out_of_order_when_one_lane_is_slow() -> None:
    slow, fast = CountingEnv(done_at=99), CountingEnv(done_at=99)
    async with serve_env([slow, fast], "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        for lane in (0, 1):
            await join.rpc(reset=env_pb.ResetRequest(env_indices=[lane], episode_ids=[f"l{lane}"]))
        slow.gate = threading.Event()
        first = await join.send(step=env_pb.StepRequest(action=act(1), env_indices=[0]))
        second = await join.send(step=env_pb.StepRequest(action=act(2), env_indices=[1]))
        reply = await join.recv()
        assert reply.request_id == second and reply.step.env_indices == [1]
        slow.gate.set()
        reply = await join.recv()
        assert reply.request_id == first and reply.step.env_indices == [0]
        await join.close()


async def test_timeout_is_recoverable_and_sent_after_the_call() -> None:
    env = CountingEnv(done_at=99)
    async with serve_env(env, "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        await join.rpc(reset=env_pb.ResetRequest())
        env.step_delay = 0.1
        reply = await join.rpc(step=env_pb.StepRequest(action=act(1), timeout_ms=20))
        assert reply.error.code == Code.TIMEOUT and reply.error.is_recoverable
        assert reply.error.message == "env.step timed out after 20ms"
        assert reply.endpoint_total_ns >= 100_000_000
        env.step_delay = 0.0
        assert kind(await join.rpc(step=env_pb.StepRequest(action=act(1)))) == "step"
        await join.close()


async def test_half_close_drops_leftovers_and_frees_the_slot() -> None:
    async with serve_env(CountingEnv(done_at=99), "127.0.0.1:0") as server:
        join = RawJoin(server.address)
        await join.open()
        await join.rpc(reset=env_pb.ResetRequest(episode_ids=["left"]))
        await join.half_close()
        assert await join.recv() is None
        await join.close()
        again, close = await rpc_once_free(server.address, close=env_pb.CloseEnvsRequest())
        assert close.close.final_episodes == []
        await again.close()


async def test_vector_env_over_grpc() -> None:
    venv = gym.vector.SyncVectorEnv(
        [lambda: CountingEnv(done_at=1), lambda: CountingEnv(done_at=2)]
    )
    async with serve_env(venv, "127.0.0.1:0") as server:
        reply = await handshake(server.address)
        assert reply.base.capabilities == {}
        assert reply.env_contract.autoreset_mode == core_pb.AutoresetMode.NEXT_STEP
        join = RawJoin(server.address)
        await join.open()
        await join.rpc(reset=env_pb.ResetRequest(episode_ids=["a", "b"]))
        first = await join.rpc(step=env_pb.StepRequest(action=act(1, 1), episode_ids=["a", "b"]))
        assert [e.episode_id for e in first.step.completed_episodes] == ["a"]
        roll = await join.rpc(step=env_pb.StepRequest(action=act(1, 1), episode_ids=["c", "b"]))
        assert roll.step.rewards == [0.0, 1.5]
        assert [e.episode_id for e in roll.step.completed_episodes] == ["b"]
        await join.close()


async def test_shutdown_disabled_then_enabled() -> None:
    request = env_pb.ShutdownRequest(base=core_pb.ShutdownRequest(reason="owner shutdown"))
    async with serve_env(CountingEnv(), "127.0.0.1:0") as server:
        reply = await unary(server.address, "Shutdown", request, env_pb.ShutdownResponse)
        assert not reply.base.accepted
        assert reply.base.message == "remote shutdown is disabled for this environment endpoint"
        with pytest.raises(GRPCError) as missing:
            await unary(
                server.address, "Shutdown", env_pb.ShutdownRequest(), env_pb.ShutdownResponse
            )
        assert missing.value.message == "shutdown request missing base"
    env = CountingEnv()
    async with bridge.asyncio_loop():
        server = EnvServer(env, "127.0.0.1:0", allow_remote_shutdown=True)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            reply = await unary(server.address, "Shutdown", request, env_pb.ShutdownResponse)
            assert reply.base.accepted and reply.base.message == "shutdown accepted: owner shutdown"
            # run() returns on its own once the shutdown is accepted.
    assert server.shutdown_reason == "owner shutdown" and env.closed


async def test_health_serving() -> None:
    from grpclib.health.v1.health_grpc import HealthStub

    async with serve_env(CountingEnv(), "127.0.0.1:0", token="sekrit") as server:
        host, port = server.address.rsplit(":", 1)

        async def check() -> int:
            import grpclib.client

            channel = grpclib.client.Channel(host, int(port))
            try:
                reply = await HealthStub(channel).Check(HealthCheckRequest(service=""))
                return reply.status
            finally:
                channel.close()

        assert await bridge.call(check) == HealthCheckResponse.SERVING


async def test_token_is_required_when_configured() -> None:
    async with serve_env(CountingEnv(), "127.0.0.1:0", token="sekrit") as server:
        with pytest.raises(GRPCError) as denied:
            await handshake(server.address)
        assert denied.value.status is Status.UNAUTHENTICATED
        assert denied.value.message == "invalid env token"
        with pytest.raises(GRPCError):
            await handshake(server.address, metadata={"authorization": "Bearer sekrit"})
        ok = await handshake(server.address, metadata={"authorization": "sekrit"})
        assert ok.base.compatible
        join = RawJoin(server.address, metadata={"authorization": "sekrit"})
        await join.open()
        assert kind(await join.rpc(reset=env_pb.ResetRequest())) == "reset"
        await join.close()


async def test_unix_socket_address(tmp_path) -> None:
    path = tmp_path / "env.sock"
    async with serve_env(TextEnvFactory(), f"unix://{path}") as server:
        assert server.address == f"unix://{path}"
        reply = await handshake(server.address)
        spec = reply.env_contract.spec
        join = RawJoin(server.address)
        await join.open()
        reset = await join.rpc(reset=env_pb.ResetRequest())
        assert spaces.decode(spec.observation_space, reset.reset.observation) == "start"
        await join.close()
    assert not path.exists()


def TextEnvFactory():
    from .._envhost_envs import TextEnv

    return TextEnv()


async def test_unreadable_requests_end_the_stream_with_a_status(monkeypatch) -> None:
    import contextlib

    import grpclib.client
    import grpclib.const

    from rlmesh_trio.transport.server import _net as _server_net

    from .._raw_codec import RawCodec

    monkeypatch.setattr(_server_net, "MAX_MESSAGE_BYTES", 4096)

    async def send_raw(address: str, payload: bytes) -> GRPCError:
        host, port = address.rsplit(":", 1)

        async def _go() -> GRPCError:
            channel = grpclib.client.Channel(host, int(port), codec=RawCodec())
            try:
                async with channel.request(
                    "/rlmesh.env.v1.EnvService/Join",
                    grpclib.const.Cardinality.STREAM_STREAM,
                    bytes,
                    bytes,
                ) as stream:
                    # Half-close with the request so grpclib reads the trailers cleanly.
                    await stream.send_message(payload, end=True)
                    with contextlib.suppress(StreamTerminatedError):
                        while await stream.recv_message() is not None:
                            pass
                        await stream.recv_trailing_metadata()
            except GRPCError as exc:
                return exc
            finally:
                channel.close()
            raise AssertionError("the stream ended with status OK")

        return await bridge.call(_go)

    async with serve_env(CountingEnv(), "127.0.0.1:0") as server:
        big = bytes(
            env_pb.JoinRequest(
                request_id="big",
                step=env_pb.StepRequest(action=spaces_pb.SpaceValue(leaves=[bytes(16384)])),
            )
        )
        refused = await send_raw(server.address, big)
        assert refused.status is Status.RESOURCE_EXHAUSTED
        garbled = await send_raw(server.address, b"\x0a\xff\xff\xff")
        assert garbled.status is Status.INVALID_ARGUMENT
        assert "could not decode a JoinRequest" in (garbled.message or "")


async def test_disconnect_mid_call_frees_the_slot_only_after_the_call() -> None:
    env = CountingEnv(done_at=99)
    # Worker threads: the loop stays free to refuse a second Join during the call
    # (with env_thread="loop" the call itself holds the loop, refusals included).
    async with serve_env(env, "127.0.0.1:0", env_thread="worker") as server:
        first = RawJoin(server.address)
        await first.open()
        await first.rpc(reset=env_pb.ResetRequest())
        env.gate = gate = Gate()
        await first.send(step=env_pb.StepRequest(action=act(1)))
        assert await trio.to_thread.run_sync(gate.reached.wait, 5)  # the step is in the env
        await first.close()  # drop the connection with the step still running
        # Not a synchronisation: the refusal below holds whether or not the server has
        # seen the drop; the pause lets it see it, so the check is of a noticed drop.
        await trio.sleep(0.05)
        blocked = RawJoin(server.address)
        await blocked.open()
        with pytest.raises(GRPCError) as busy:
            await blocked.recv()
        assert busy.value.status is Status.FAILED_PRECONDITION
        await blocked.close()
        env.gate.set()
        again, reply = await rpc_once_free(server.address, step=env_pb.StepRequest(action=act(1)))
        assert (
            env.t == 2 and reply.step.completed_episodes == []
        )  # the dropped session's episode is gone
        await again.close()


@pytest.mark.parametrize("env_thread", ["loop", "worker"])
async def test_leaving_serve_env_is_bounded_even_with_a_hung_env_call(
    monkeypatch, env_thread: str
) -> None:
    from rlmesh_trio.transport.server import _env_server

    monkeypatch.setattr(_env_server, "DRAIN_TIMEOUT", 0.3)
    monkeypatch.setattr(_env_server, "CLOSE_TIMEOUT", 0.3)
    env = CountingEnv(done_at=99)
    env.gate = gate = Gate()

    def server_thread_alive() -> bool:
        return any(t.name == SERVER_THREAD for t in threading.enumerate())

    try:
        with trio.fail_after(5):
            async with serve_env(env, "127.0.0.1:0", env_thread=env_thread) as server:
                join = RawJoin(server.address)
                await join.open()
                await join.rpc(reset=env_pb.ResetRequest())
                await join.send(step=env_pb.StepRequest(action=act(1)))
                await trio.to_thread.run_sync(gate.reached.wait, 5)  # the call is hung
        # On worker threads the server's own loop gives up on the hung call and ends;
        # inline, the call holds the server's thread, which is left behind until it returns.
        if env_thread == "loop":
            assert server_thread_alive()
        else:
            # It has signalled "finished"; it is exiting.
            assert await threads_ended({SERVER_THREAD}, 1.0)
    finally:
        env.gate.set()  # let the stuck thread finish
    assert await threads_ended({SERVER_THREAD}, 5.0)


async def test_remote_shutdown_with_an_open_session_is_bounded(monkeypatch) -> None:
    from rlmesh_trio.transport.server import _env_server

    monkeypatch.setattr(_env_server, "DRAIN_TIMEOUT", 0.4)
    request = env_pb.ShutdownRequest(base=core_pb.ShutdownRequest(reason="owner shutdown"))
    async with bridge.asyncio_loop():
        server = EnvServer(CountingEnv(), "127.0.0.1:0", allow_remote_shutdown=True)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.run)
                join = RawJoin(server.address)
                await join.open()
                await join.rpc(reset=env_pb.ResetRequest())
                reply = await unary(server.address, "Shutdown", request, env_pb.ShutdownResponse)
                assert reply.base.accepted
                # The idle session never ends by itself: run() still returns after the drain.
        with pytest.raises((GRPCError, StreamTerminatedError, ConnectionError, OSError)):
            await handshake(server.address)
        await join.close()


@pytest.mark.parametrize("env_thread", ["loop", "worker", "auto"])
def test_blocking_serve_on_a_taken_port_raises_and_returns(env_thread: str) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        before = threading.active_count()
        server = EnvServer(CountingEnv(), f"127.0.0.1:{port}")
        with pytest.raises(OSError):
            server.serve(env_thread=env_thread)
        # No worker thread is left behind (they exit once stopped).
        for _ in range(100):
            if threading.active_count() <= before:
                break
            threading.Event().wait(0.01)
        assert threading.active_count() <= before
    finally:
        taken.close()


def test_blocking_serve_refuses_an_unknown_env_thread() -> None:
    with pytest.raises(ValueError, match="env_thread"):
        EnvServer(CountingEnv(), "127.0.0.1:0").serve(env_thread="elsewhere")


@pytest.mark.parametrize(
    ("env", "where"),
    [(42, "env"), ("CartPole-v1", "env"), ([CountingEnv(), object()], r"env\[1\]")],
)
def test_a_non_env_is_refused_with_a_type_error_naming_it(env: object, where: str) -> None:
    with pytest.raises(TypeError, match=rf"^{where} must be a gymnasium Env.*\(no reset, step"):
        EnvServer(env)
