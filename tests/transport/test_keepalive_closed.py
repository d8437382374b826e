"""The client keepalive on a connection the peer is closing (GOAWAY received, a stream still
finishing): no PING is sent on the closed HTTP/2 connection, and nothing raises.

This was the intermittent ``h2 ProtocolError: SEND_PING in state CLOSED`` at the end of
``demo --record``: the servers shut down with GOAWAY while a Join stream was still
finishing, and the 30 s keepalive timer fired in that window.
"""

from __future__ import annotations

import h2.config
import h2.connection
import pytest
import trio

from rlmesh_trio import _wire as wire
from rlmesh_trio.transport._stream import SocketByteStream
from rlmesh_trio.transport.client import _conn
from rlmesh_trio.transport.client._conn import Connection


class _Handler:
    def __init__(self) -> None:
        self.lost: str | None = None

    def on_headers(self, headers: list[tuple[str, str]]) -> None:
        pass

    def on_message(self, data: bytes) -> None:
        pass

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None:
        pass

    def on_lost(self, detail: str) -> None:
        self.lost = detail

    def replies_owed(self) -> bool:
        return True


def test_ping_on_a_closed_core_is_refused_not_raised() -> None:
    core = wire.ClientCore()
    core.initiate()
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    server.receive_data(core.data_to_send())
    server.close_connection(last_stream_id=0)
    core.receive_data(server.data_to_send())
    assert core.terminated is not None
    assert core.ping(b"12345678") is False


async def test_keepalive_after_goaway_stops_without_pinging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    conn = Connection(SocketByteStream(stream), "localhost", "http")
    conn._core.initiate()
    handler = _Handler()
    stream_id = conn.open_stream("/rlmesh.env.v1.EnvService/Join", handler, metadata=None)
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    server.receive_data(conn._core.data_to_send())
    # The server shuts down: GOAWAY, but the open stream may still finish.
    server.close_connection(last_stream_id=stream_id)
    conn.process(server.data_to_send())
    assert conn._core.terminated is not None and conn.lost is None
    monkeypatch.setattr(_conn, "KEEPALIVE_INTERVAL", 0.0)
    with trio.fail_after(10):
        await conn._keepalive()  # returns: a closing connection needs no keepalive
    assert conn.lost is None and handler.lost is None
    await stream.aclose()
    theirs.close()
