"""A call's messages served inline by the connection's reader (``ServerCall.inline``).

The servers' Join streams take this path on every step (real servers, in the
other tests); here a stand-in connection pins down when the reader may serve
a message itself and what the handler then sees, edge cases a real client
cannot time on purpose.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from rlmesh_trio import _wire as wire
from rlmesh_trio.transport.server._call import CallLost, ServerCall


class _Conn:
    """What a call asks of its connection, recorded."""

    def __init__(self, room: bool = True) -> None:
        self.room = room
        self.released = 0
        self.queued: list[bytes] = []
        self.headers = 0

    def release(self, size: int) -> None:
        self.released += size

    def send_headers(self, stream_id: int) -> None:
        self.headers += 1

    def queue_message(self, call: ServerCall, payload: bytes) -> None:
        self.queued.append(payload)

    def has_room(self, call: ServerCall) -> bool:
        return self.room

    async def wait_sent(self, call: ServerCall) -> None:
        await trio.lowlevel.checkpoint()

    def finish(self, call: ServerCall, status: wire.GrpcStatus, message: str | None) -> None:
        pass


def _call(conn: _Conn) -> ServerCall:
    return ServerCall(conn, 1, "/x/Join", {})


async def test_a_waiting_handler_s_message_is_served_by_the_reader() -> None:
    conn = _Conn()
    call = _call(conn)
    served: list[bytes] = []

    def serve(data: bytes) -> bool:
        served.append(data)
        call.send_now(b"reply to " + data)
        return True

    call.inline = serve
    got: list[bytes | None] = []
    async with trio.open_nursery() as nursery:

        async def handler() -> None:
            got.append(await call.recv())

        nursery.start_soon(handler)
        await trio.testing.wait_all_tasks_blocked()
        call.deliver(b"one")  # the handler waits: served here
        assert served == [b"one"] and conn.queued == [b"reply to one"]
        assert conn.released == len(b"one") + 5
        call.half_close()
    assert got == [None]  # the handler never saw the served message


async def test_a_message_is_left_to_the_handler_when_it_is_busy_or_declined() -> None:
    conn = _Conn()
    call = _call(conn)
    call.inline = lambda data: data != b"decline"
    call.deliver(b"early")  # nobody waits in recv() yet: the handler's
    assert await call.recv() == b"early"
    async with trio.open_nursery() as nursery:
        got: list[bytes | None] = []

        async def handler() -> None:
            got.append(await call.recv())

        nursery.start_soon(handler)
        await trio.testing.wait_all_tasks_blocked()
        call.deliver(b"decline")
    assert got == [b"decline"]


async def test_no_inline_serving_while_the_reply_queue_is_full() -> None:
    conn = _Conn(room=False)
    call = _call(conn)
    call.inline = lambda data: pytest.fail("served with a full reply queue")
    async with trio.open_nursery() as nursery:
        got: list[bytes | None] = []

        async def handler() -> None:
            got.append(await call.recv())

        nursery.start_soon(handler)
        await trio.testing.wait_all_tasks_blocked()
        call.deliver(b"waits")
    assert got == [b"waits"]


async def test_what_inline_serving_raised_comes_out_of_recv() -> None:
    conn = _Conn()
    call = _call(conn)

    def serve(data: bytes) -> bool:
        raise wire.GrpcError(wire.GrpcStatus.RESOURCE_EXHAUSTED, "reply too big")

    call.inline = serve
    raised: list[BaseException] = []

    async def handler() -> None:
        try:
            await call.recv()
        except wire.GrpcError as exc:
            raised.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handler)
        await trio.testing.wait_all_tasks_blocked()
        call.deliver(b"x")
    assert [str(exc) for exc in raised] == ["RESOURCE_EXHAUSTED: reply too big"]
    assert conn.released == 6


async def test_a_cancelled_recv_is_no_longer_waiting() -> None:
    conn = _Conn()
    call = _call(conn)
    call.inline = lambda data: pytest.fail("served for a handler that left recv()")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call.recv)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    call.deliver(b"later")
    assert await call.recv() == b"later"
    call.lose("gone")
    with pytest.raises(CallLost):
        await call.recv()
