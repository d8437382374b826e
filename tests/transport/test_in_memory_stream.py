"""The transport with no socket: client and server connections over an in-memory byte stream.

Both halves talk to the byte-stream seam (``transport/_stream.py``) only, so
``trio.testing``'s in-memory stream pair stands in for a TCP connection: a
handshake, a unary call, a flow-controlled large message both ways, and a
GOAWAY, all through the real connection code and the real wire core.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from rlmesh_trio import _wire as wire
from rlmesh_trio.transport._stream import BufferedByteStream, ByteStream
from rlmesh_trio.transport.client._conn import Connection
from rlmesh_trio.transport.server._call import ServerCall
from rlmesh_trio.transport.server._conn import ServerConnection, Service
from rlmesh_trio.transport.server._health_service import health_routes

ECHO = "/test.Echo/Echo"
#: Far past HTTP/2's initial 65,535-byte window: the message needs the windows opened.
LARGE = 3 * 1024 * 1024


async def _echo(call: ServerCall) -> None:
    data = await call.recv()
    assert data is not None
    call.send_headers()
    await call.send(data[::-1])


class _Call:
    """One call's outcome as the client connection reports it."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.headers: list[tuple[str, str]] | None = None
        self.messages: list[bytes] = []
        self.status: wire.GrpcStatus | None = None
        self.lost: str | None = None

    def on_headers(self, headers: list[tuple[str, str]]) -> None:
        self.headers = headers

    def on_message(self, data: bytes) -> None:
        self.messages.append(data)

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None:
        self.status = status
        self.done.set()

    def on_lost(self, detail: str) -> None:
        self.lost = detail
        self.done.set()

    def replies_owed(self) -> bool:
        return not self.done.is_set()


class _Pair:
    def __init__(self, client: Connection, server: ServerConnection) -> None:
        self.client = client
        self.server = server

    async def call(self, path: str, payload: bytes) -> _Call:
        call = _Call()
        stream_id = self.client.open_stream(path, call, metadata=None, timeout=10.0)
        self.client.send(stream_id, payload, end=True)
        await self.client.flush()
        with trio.fail_after(10):
            await self.client.wait_reply(_Waiter(call))
        return call


class _Waiter:
    """A reply waiter (``ReplyWait``) for one call."""

    def __init__(self, call: _Call) -> None:
        self._call = call
        self.event: trio.Event | None = None

    @property
    def done(self) -> bool:
        return self._call.done.is_set()


@pytest.fixture
async def pair() -> AsyncIterator[_Pair]:
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        service = Service(
            {**health_routes(), ECHO: _echo},
            wire.ServerLimits(),
            token=None,
            token_refusal="",
            nursery=nursery,
        )
        server = ServerConnection(service, BufferedByteStream(server_end))
        nursery.start_soon(server.run)
        stream: ByteStream = BufferedByteStream(client_end)
        client = await Connection.over(stream, "memory")
        try:
            yield _Pair(client, server)
        finally:
            client.close()
            server.close()
            nursery.cancel_scope.cancel()


async def test_the_handshake_completes_over_memory(pair: _Pair) -> None:
    with trio.fail_after(10):
        while not pair.server.core.preface_received:
            await trio.sleep(0)
    assert pair.client.usable
    assert pair.server.lost is None


async def test_a_unary_call_over_memory(pair: _Pair) -> None:
    call = await pair.call("/grpc.health.v1.Health/Check", b"")
    assert call.lost is None
    assert call.status is wire.GrpcStatus.OK
    assert call.messages == [b"\x08\x01"]  # SERVING


async def test_an_unknown_method_is_unimplemented_over_memory(pair: _Pair) -> None:
    call = await pair.call("/no.Such/Method", b"x")
    assert call.status is wire.GrpcStatus.UNIMPLEMENTED


async def test_a_flow_controlled_large_message_both_ways(pair: _Pair) -> None:
    payload = bytes(range(256)) * (LARGE // 256)
    call = await pair.call(ECHO, payload)
    assert call.status is wire.GrpcStatus.OK
    assert call.messages == [payload[::-1]]


async def test_a_goaway_drains_the_client_connection(pair: _Pair) -> None:
    first = await pair.call(ECHO, b"abc")
    assert first.messages == [b"cba"]
    # Frames the client still has in flight (its SETTINGS acknowledgement among them)
    # are taken after a graceful GOAWAY (RFC 9113 §6.8), not refused.
    pair.server.goaway()  # no new calls; the connection itself stays up
    with trio.fail_after(10):
        while pair.client.usable:
            await trio.testing.wait_all_tasks_blocked()
    # The client read the GOAWAY (with no stream open, it then drops the connection).
    terminated = pair.client._core.terminated
    assert terminated is not None
    assert terminated.error_code == 0  # NO_ERROR: a graceful end
    assert pair.client.lost == "connection closed"
