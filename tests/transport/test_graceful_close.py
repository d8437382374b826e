"""A connection our server ends (idle, stopping) ends with HTTP/2 frames and a FIN, never a
TCP reset (issue 34, item 7).

Closing a socket while the client's frames are still unread or still on their way
(its half-close, a WINDOW_UPDATE, its own GOAWAY) makes the kernel answer with a
reset, and a reset throws away what the client had not read yet: the stream's
trailers, the GOAWAY. rlmesh 0.1.0 then logged ``join stream error from env server
... ConnectionReset`` for a session that had ended cleanly. Each test plays a client
that still sends after the server's GOAWAY, then reads to the end: it must see the
frames and the end of the stream, not ``ECONNRESET``.
"""

from __future__ import annotations

import socket
import threading
import time

import gymnasium as gym
import h2.config
import h2.connection
import h2.events
import hyperframe.frame

import rlmesh_trio as rt
from rlmesh_trio._protocol import env_pb

ENV_JOIN = "/rlmesh.env.v1.EnvService/Join"
#: Long enough for a server that closed at once to have its reset on the wire.
IN_FLIGHT = 0.3


def _connect(server: rt.EnvServer) -> tuple[socket.socket, h2.connection.H2Connection]:
    host, port = server.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def _read_until(
    sock: socket.socket, conn: h2.connection.H2Connection, kind: type, seen: list[object]
) -> None:
    """Read (answering what h2 answers) until an event of ``kind`` is among ``seen``."""
    while not any(isinstance(event, kind) for event in seen):
        data = sock.recv(65536)
        assert data, f"the server closed before sending {kind.__name__}"
        seen += conn.receive_data(data)
        sock.sendall(conn.data_to_send())


def _rest(sock: socket.socket) -> bytes:
    """What the server still sends until its end of the connection (raises on a reset)."""
    rest = b""
    while chunk := sock.recv(65536):
        rest += chunk
    return rest


def _message(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def test_an_idle_connection_the_client_still_writes_to_ends_with_a_fin() -> None:
    server = rt.EnvServer(
        gym.make("CartPole-v1"), "127.0.0.1:0", limits=rt.ServerLimits(idle_timeout=0.2)
    )
    server.start()
    try:
        sock, conn = _connect(server)
        seen: list[object] = []
        _read_until(sock, conn, h2.events.ConnectionTerminated, seen)
        # What the client sent before it read the GOAWAY (h2 would send nothing after it).
        sock.sendall(hyperframe.frame.PingFrame(0, opaque_data=b"in-fligh").serialize())
        time.sleep(IN_FLIGHT)
        assert _rest(sock) == b""  # the server's FIN: no ConnectionResetError
        sock.close()
    finally:
        server.shutdown()
    (goaway,) = [e for e in seen if isinstance(e, h2.events.ConnectionTerminated)]
    assert goaway.error_code == 0


def test_a_stopping_server_ends_an_open_join_with_trailers_goaway_and_a_fin() -> None:
    server = rt.EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0")
    server.start()
    stopping = threading.Thread(target=server.shutdown)
    try:
        sock, conn = _connect(server)
        stream = conn.get_next_available_stream_id()
        conn.send_headers(
            stream,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", ENV_JOIN),
                (":authority", "localhost"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        reset = env_pb.JoinRequest(request_id="r1", reset=env_pb.ResetRequest(seeds=[1]))
        conn.send_data(stream, _message(bytes(reset)))
        sock.sendall(conn.data_to_send())
        seen: list[object] = []
        _read_until(sock, conn, h2.events.DataReceived, seen)  # the reset's reply
        stopping.start()
        _read_until(sock, conn, h2.events.ConnectionTerminated, seen)
        # The client's half-close was on its way when the server stopped.
        half_close = hyperframe.frame.DataFrame(stream, b"", flags=["END_STREAM"])
        sock.sendall(half_close.serialize())
        time.sleep(IN_FLIGHT)
        assert _rest(sock) == b""  # the server's FIN: no ConnectionResetError
        sock.close()
    finally:
        if not stopping.is_alive():
            stopping = threading.Thread(target=server.shutdown)
            stopping.start()
        stopping.join(30)
    ended = [e for e in seen if isinstance(e, h2.events.StreamEnded)]
    trailers = [e for e in seen if isinstance(e, h2.events.TrailersReceived)]
    (goaway,) = [e for e in seen if isinstance(e, h2.events.ConnectionTerminated)]
    assert [e.stream_id for e in ended] == [stream]
    assert dict(trailers[0].headers)["grpc-status"] == "14"  # UNAVAILABLE: stopping
    assert goaway.error_code == 0
    kinds = [type(e) for e in seen]
    assert kinds.index(h2.events.StreamEnded) < kinds.index(h2.events.ConnectionTerminated)
