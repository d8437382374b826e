"""The Join session's delivering receive buffer (responses resolved from the protocol's data path).

Unit tests feed the buffer the way grpclib's protocol does (one call per DATA
frame payload, any split); the loopback tests check that a real session uses
it, and that the reader-task fallback (used when grpclib's internals are not
as expected) still carries the same traffic.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from rlmesh_trio._errors import ConnectError, EnvRpcError
from rlmesh_trio._wire import env_pb, model_pb, spaces_pb
from rlmesh_trio.transport import _join
from rlmesh_trio.transport._join import _DeliveringBuffer, _Undecodable
from rlmesh_trio.transport._remote_env import RemoteEnv
from rlmesh_trio.transport._remote_model import RemoteModel

from .test_transport_clients import (
    BIDI,
    ENV,
    MODEL,
    FakeService,
    lane_step_response,
    predict_request,
    serve_fake,
    step_request,
)

pytestmark = pytest.mark.timeout(30)


async def _echo_env_join(stream: Any) -> None:
    await stream.send_initial_metadata()
    async for data in stream:
        await stream.send_message(bytes(lane_step_response(env_pb.JoinRequest.parse(data))))


async def _env_join_ending_at_lane_2(stream: Any) -> None:
    await stream.send_initial_metadata()
    async for data in stream:
        request = env_pb.JoinRequest.parse(data)
        if request.step is not None and request.step.env_indices == [2]:
            return  # then the server ends the stream mid-request
        await stream.send_message(bytes(lane_step_response(request)))


def _count_acks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record every immediate ACK the readers send (none are eager)."""
    from rlmesh_trio.transport import _bridge as bridge

    monkeypatch.setattr(bridge, "EAGER_ACK_READS", 0)
    acks: list[int] = []
    monkeypatch.setattr(bridge, "_acknowledge_now", lambda sock, option: acks.append(option))
    return acks


def frame(message: bytes, *, compressed: bool = False) -> bytes:
    return bytes([1 if compressed else 0]) + len(message).to_bytes(4, "big") + message


class Recorder:
    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.acks: list[int] = []

    def buffer(self) -> _DeliveringBuffer:
        return _DeliveringBuffer(self.acks.append, self.messages.append)


def test_messages_are_delivered_whole_whatever_the_frame_split() -> None:
    messages = [b"", b"a", b"hello world", bytes(range(256)) * 40]
    wire = b"".join(frame(m) for m in messages)
    for chunk in (1, 2, 3, 5, 6, 7, 64, 1000, len(wire)):
        rec = Recorder()
        buffer = rec.buffer()
        for pos in range(0, len(wire), chunk):
            piece = wire[pos : pos + chunk]
            buffer.add(piece, len(piece))
        assert rec.messages == messages, chunk
        # flow-control credit is returned for every byte at once
        assert sum(rec.acks) == len(wire)
        assert buffer.error is None
        assert not buffer.ended.is_set()


def test_eof_sets_ended_and_reads_return_nothing() -> None:
    rec = Recorder()
    buffer = rec.buffer()
    buffer.add(frame(b"x"), 6)
    buffer.eof()
    assert buffer.ended.is_set()
    assert rec.messages == [b"x"]
    assert buffer.unacked_size() == 0  # grpclib asks this when it releases the stream


def test_compressed_message_stops_delivery_with_a_reason() -> None:
    rec = Recorder()
    buffer = rec.buffer()
    buffer.add(frame(b"a") + frame(b"b", compressed=True) + frame(b"c"), 18)
    assert rec.messages == [b"a"]
    assert buffer.ended.is_set()
    assert isinstance(buffer.error, _Undecodable)
    assert "compressed" in str(buffer.error)
    buffer.add(frame(b"d"), 6)  # later data is acknowledged, never delivered
    assert rec.messages == [b"a"]
    assert rec.acks == [18, 6]


def test_a_failing_delivery_never_raises_into_the_protocol() -> None:
    def deliver(message: bytes) -> None:
        if message == b"bad":
            raise _Undecodable("undecodable Join response (test)")
        if message == b"bug":
            raise KeyError("bug")

    for poison, reason in ((b"bad", "undecodable Join response"), (b"bug", "delivery failed")):
        buffer = _DeliveringBuffer(lambda _n: None, deliver)
        buffer.add(frame(b"ok") + frame(poison), 10)
        assert buffer.ended.is_set()
        assert buffer.error is not None and reason in str(buffer.error)


@pytest.fixture(params=["direct", "reader-task"])
def delivery(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the delivering buffer (as shipped) and with the reader-task fallback."""
    installed: list[Any] = []
    original = _join._install_delivering_buffer

    def install(stream: Any, deliver: Any) -> Any:
        buffer = original(stream, deliver) if request.param == "direct" else None
        installed.append(buffer)
        return buffer

    monkeypatch.setattr(_join, "_install_delivering_buffer", install)
    request.node.installed = installed
    return str(request.param)


def _installed(request: pytest.FixtureRequest) -> list[Any]:
    return request.node.installed  # type: ignore[no-any-return]


async def test_sessions_use_the_delivering_buffer(
    delivery: str, request: pytest.FixtureRequest
) -> None:
    service = FakeService({f"{ENV}/Join": (_echo_env_join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        for lane in range(3):
            reply = await env.step(step_request(lane))
            assert reply.response.rewards == [float(lane)]
    kinds = [type(b).__name__ for b in _installed(request)]
    assert kinds == (["_DeliveringBuffer"] if delivery == "direct" else ["NoneType"])


async def test_large_and_small_messages_in_both_delivery_modes(delivery: str) -> None:
    echo_join = _echo_model_join()
    sizes = [2 * 1024 * 1024, 10, 300_000, 7, 70_000, 1]
    service = FakeService({f"{MODEL}/Join": (echo_join, BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:

        async def one(i: int, size: int) -> None:
            req = predict_request(f"r{i}", 1)
            req.observation = spaces_pb.SpaceValue(leaves=[bytes([i]) * size])
            reply = await model.predict(req)
            assert reply.response.actions[0].leaves == [bytes([i]) * size]

        async with trio.open_nursery() as nursery:
            for i, size in enumerate(sizes):
                nursery.start_soon(one, i, size)


async def test_stream_end_and_undecodable_reply_in_both_delivery_modes(delivery: str) -> None:
    async def ending_join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.configure is None:
                return
            await stream.send_message(bytes(lane_step_response(request)))

    async def garbage_join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for _data in stream:
            await stream.send_message(b"\x0a\x05\x0a")

    service = FakeService({f"{ENV}/Join": (ending_join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        with pytest.raises(EnvRpcError, match="transport error: connection closed"):
            await env.step(step_request(0))
    service = FakeService({f"{ENV}/Join": (garbage_join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        with pytest.raises(ConnectError, match="undecodable Join response"):
            await env.configure("2026.06")


# ---- socket reads without trio-asyncio's per-read loop pass -----------------


async def test_client_connections_read_without_the_per_read_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlmesh_trio.transport import _bridge as bridge

    results: list[bool] = []
    original = bridge.read_without_sync

    def spy(fd: int) -> bool:
        results.append(original(fd))
        return results[-1]

    monkeypatch.setattr(bridge, "read_without_sync", spy)

    service = FakeService({f"{ENV}/Join": (_env_join_ending_at_lane_2, BIDI)})
    async with serve_fake(service) as address:
        async with RemoteEnv(address) as env:
            await env.configure("2026.06")
            for lane in range(2):
                assert (await env.step(step_request(lane))).response.rewards == [float(lane)]
            with pytest.raises(EnvRpcError, match="connection closed"):
                await env.step(step_request(2))
        # a second client on a new connection gets its own reader, and closes cleanly
        async with RemoteEnv(address) as env:
            await env.configure("2026.06")
    assert results == [True, True]


async def test_client_reads_go_straight_to_the_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads skip the transport's dispatch layers; EOF still reaches grpclib (connection closed)."""
    from rlmesh_trio.transport import _bridge as bridge

    readers: list[list[bool] | None] = []
    original = bridge._direct_reader

    def spy(handle: Any) -> Any:
        read = original(handle)
        if read is None:
            readers.append(None)
            return None
        reads: list[bool] = []
        readers.append(reads)

        def counted() -> bool:
            reads.append(read())
            return reads[-1]

        return counted

    monkeypatch.setattr(bridge, "_direct_reader", spy)

    service = FakeService({f"{ENV}/Join": (_env_join_ending_at_lane_2, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        for lane in range(2):
            assert (await env.step(step_request(lane))).response.rewards == [float(lane)]
        with pytest.raises(EnvRpcError, match="connection closed"):
            await env.step(step_request(2))
    assert len(readers) == 1 and readers[0] is not None
    assert len(readers[0]) >= 3 and all(readers[0])


async def _acks_during(monkeypatch: pytest.MonkeyPatch, hold_second_reply: bool) -> list[int]:
    """Two lanes step at once; the server answers lane 0, then (optionally later) lane 1."""
    import asyncio

    acks = _count_acks(monkeypatch)

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        held: list[Any] = []
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            if request.step is None:
                await stream.send_message(bytes(lane_step_response(request)))
                continue
            held.append(request)
            if len(held) == 2:
                await stream.send_message(bytes(lane_step_response(held[0])))
                if hold_second_reply:
                    await asyncio.sleep(0.05)  # lane 1's reply comes in a read of its own
                await stream.send_message(bytes(lane_step_response(held[1])))
                held.clear()

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")
        before = len(acks)
        async with trio.open_nursery() as nursery:
            for lane in range(2):
                nursery.start_soon(env.step, step_request(lane))
        return acks[before:]


async def test_a_read_that_leaves_replies_owed_is_acknowledged_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    acks = await _acks_during(monkeypatch, hold_second_reply=True)
    # lane 0's reply alone: lane 1's is still owed -> ACK now; lane 1's reply: nothing owed
    assert acks == [socket.TCP_QUICKACK]


async def test_reads_that_answer_everything_cost_no_acknowledgement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    acks = _count_acks(monkeypatch)

    service = FakeService({f"{ENV}/Join": (_echo_env_join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        await env.configure("2026.06")  # (its reply may follow the stream's headers: ACKed)
        before = len(acks)
        for _ in range(20):
            await env.step(step_request(0))
    assert acks[before:] == []


async def test_read_without_sync_refuses_unknown_descriptors() -> None:
    import socket

    from rlmesh_trio.transport import _bridge as bridge

    async with bridge.asyncio_loop():
        left, right = socket.socketpair()
        with left, right:
            assert bridge.read_without_sync(left.fileno()) is False


# ---- plain DATA frames around h2's frame walk --------------------------------


def _echo_model_join() -> Any:
    async def echo_join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            req = model_pb.JoinRequest.parse(data)
            assert req.predict is not None
            reply = model_pb.JoinResponse(
                request_id=req.request_id,
                predict=model_pb.PredictResponse(
                    context=req.predict.context,
                    actions=[req.predict.observation or spaces_pb.SpaceValue()],
                ),
            )
            await stream.send_message(bytes(reply))

    return echo_join


async def test_hot_path_frames_skip_h2_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmesh_trio.transport import _h2fast

    sent: list[bool] = []
    original = _h2fast.send_data

    def spy(stream: Any, frame: bytes) -> bool:
        sent.append(original(stream, frame))
        return sent[-1]

    monkeypatch.setattr(_h2fast, "send_data", spy)
    service = FakeService({f"{MODEL}/Join": (_echo_model_join(), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:
        for n in range(20):
            reply = await model.predict(predict_request("a", n))
            assert reply.response.actions[0].leaves == [bytes(4)]
        receiver = model._conn.channel._protocol.data_received
        assert isinstance(receiver, _h2fast._FastReceive)
        assert receiver.fast >= 15  # the first reads carry headers and settings
    assert sent.count(True) >= 19


async def test_flow_control_credit_keeps_flowing_on_the_short_paths() -> None:
    # 24 MiB each way through 16 MiB windows: stalls unless both paths account
    # the windows and the WINDOW_UPDATEs go out and come back.
    service = FakeService({f"{MODEL}/Join": (_echo_model_join(), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:

        async def worker(w: int) -> None:
            for n in range(48):
                req = predict_request(f"w{w}", n)
                req.observation = spaces_pb.SpaceValue(leaves=[bytes([w, n]) * 4096])
                reply = await model.predict(req)
                assert reply.response.actions[0].leaves == [bytes([w, n]) * 4096]

        async with trio.open_nursery() as nursery:
            for w in range(64):
                nursery.start_soon(worker, w)


async def test_fast_receive_declines_anything_but_plain_data_frames() -> None:
    from rlmesh_trio.transport import _h2fast

    service = FakeService({f"{MODEL}/Join": (_echo_model_join(), BIDI)})
    async with serve_fake(service) as address, RemoteModel(address) as model:
        await model.predict(predict_request("a", 1))
        receiver = model._conn.channel._protocol.data_received
        assert isinstance(receiver, _h2fast._FastReceive)
        (stream_id,) = receiver._processor.streams

        def data_frame(payload: bytes, *, kind: int = 0, flags: int = 0, sid: int = 0) -> bytes:
            header = len(payload).to_bytes(3, "big") + bytes([kind, flags])
            return header + (sid or stream_id).to_bytes(4, "big") + payload

        plain = data_frame(b"abc")
        plan = receiver._plan(plain + data_frame(b"de"))
        assert plan is not None and [(start, size) for _s, _h, start, size in plan] == [
            (9, 3),
            (21, 2),
        ]
        for chunk in (
            data_frame(b"abc", flags=1),  # END_STREAM
            data_frame(b"abc", flags=8),  # PADDED
            data_frame(b"", kind=1),  # HEADERS
            plain + data_frame(b"", kind=8),  # then a WINDOW_UPDATE
            plain[:-1],  # a frame split across reads
            plain[:5],
            data_frame(b"abc", sid=stream_id + 2),  # no such stream
        ):
            assert receiver._plan(chunk) is None, chunk
        # nothing above changed any state: the session still works
        reply = await model.predict(predict_request("a", 2))
        assert reply.response.actions[0].leaves == [bytes(4)]


def test_install_declines_objects_that_are_not_grpclib_protocols() -> None:
    from rlmesh_trio.transport import _h2fast

    class NotAProtocol:
        def data_received(self, data: bytes) -> None:
            pass

    thing = NotAProtocol()
    assert _h2fast.install_fast_receive(thing) is False
    assert not isinstance(thing.data_received, _h2fast._FastReceive)
    assert _h2fast.send_data(object(), b"frame") is False


def test_credit_is_returned_in_batches_and_the_rest_on_release() -> None:
    rec = Recorder()
    buffer = _DeliveringBuffer(rec.acks.append, rec.messages.append, ack_batch=100)
    for _ in range(7):
        buffer.add(frame(bytes(25)), 30)
    assert rec.acks == [120]  # 30, 60, 90, then over the batch: all of it
    assert len(rec.messages) == 7
    assert buffer.unacked_size() == 90  # grpclib acknowledges this on release
    assert buffer.unacked_size() == 0


async def test_owed_credit_is_returned_when_a_stream_is_released() -> None:
    # Eight Join sessions in turn on one connection, each taking 3 MiB -- under the
    # ack batch, so all of it is still owed when its stream ends. 24 MiB in all
    # through a 16 MiB connection window: stalls unless released streams pay up.
    big = bytes(1024 * 1024)

    async def join(stream: Any) -> None:
        await stream.send_initial_metadata()
        async for data in stream:
            request = env_pb.JoinRequest.parse(data)
            rid = request.request_id
            if request.configure is not None:
                reply = env_pb.JoinResponse(request_id=rid, configure=env_pb.ConfigureEnvResponse())
            elif request.close is not None:
                await stream.send_message(
                    bytes(env_pb.JoinResponse(request_id=rid, close=env_pb.CloseEnvsResponse()))
                )
                return
            else:
                observation = spaces_pb.SpaceValue(leaves=[big])
                reply = env_pb.JoinResponse(
                    request_id=rid, step=env_pb.StepResponse(observation=observation)
                )
            await stream.send_message(bytes(reply))

    service = FakeService({f"{ENV}/Join": (join, BIDI)})
    async with serve_fake(service) as address, RemoteEnv(address) as env:
        for _session in range(8):
            await env.configure("2026.06")
            for lane in range(3):
                with trio.fail_after(10):
                    reply = await env.step(step_request(lane))
                assert reply.response.observation is not None
                assert len(reply.response.observation.leaves[0]) == len(big)
            await env.close(5.0)
