"""How cheap can one Join round trip be in Python? Floors below grpclib (issue 7 item 3).

Against an rlmesh 0.1.0 model server (subprocess), one open Join stream,
the same pre-encoded predict request each time; client CPU
(``time.process_time``) and wall time per round trip for:

    F1  the ``h2`` library on a blocking socket (no asyncio, no grpclib)
    F2  hand-built HTTP/2 DATA frames on a blocking socket: h2 only opens the
        stream; each round trip writes one 9-byte frame header + gRPC prefix
        + payload and reads frames by their 9-byte headers (WINDOW_UPDATE
        sent back now and then)

Compare with ``hot_path_layers.py`` L0 (asyncio + grpclib). Blocking
sockets make these floors, not designs: a Trio client would add one
``wait_readable`` per response (a few us) on top of F2.

    python benchmarks/transport_floor.py [--n 3000]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
import warnings

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402
from hot_path_layers import _envelopes, _host_port  # noqa: E402

_JOIN = "/rlmesh.model.v1.ModelService/Join"
_DATA, _HEADERS, _RST, _SETTINGS, _PING, _GOAWAY, _WINDOW = 0, 1, 3, 4, 6, 7, 8


def _grpc_frame(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def _open(address: str) -> tuple[socket.socket, h2.connection.H2Connection, int]:
    host, port = _host_port(address)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.increment_flow_control_window(2**30)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(
        sid,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", _JOIN),
            (":authority", f"{host}:{port}"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    conn.increment_flow_control_window(2**30, stream_id=sid)
    sock.sendall(conn.data_to_send())
    return sock, conn, sid


def _h2_roundtrip(
    sock: socket.socket, conn: h2.connection.H2Connection, sid: int, frame: bytes
) -> None:
    conn.send_data(sid, frame)
    sock.sendall(conn.data_to_send())
    while True:
        events = conn.receive_data(sock.recv(65536))
        got = False
        for event in events:
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, sid)
                got = True
        pending = conn.data_to_send()
        if pending:
            sock.sendall(pending)
        if got:
            return


def floor_h2(address: str, n: int) -> tuple[float, float]:
    resolve, predict = _envelopes()
    sock, conn, sid = _open(address)
    try:
        _h2_roundtrip(sock, conn, sid, _grpc_frame(resolve))
        frame = _grpc_frame(predict)
        for _ in range(50):
            _h2_roundtrip(sock, conn, sid, frame)
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            _h2_roundtrip(sock, conn, sid, frame)
        return (time.perf_counter() - w0) / n * 1e6, (time.process_time() - c0) / n * 1e6
    finally:
        sock.close()


class _RawReader:
    """Reads HTTP/2 frames by their headers; returns the next gRPC message on the stream."""

    def __init__(self, sock: socket.socket, sid: int) -> None:
        self.sock = sock
        self.sid = sid
        self.buf = bytearray()
        self.unacked = 0

    def _fill(self, need: int) -> None:
        while len(self.buf) < need:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def message(self) -> bytes:
        while True:
            self._fill(9)
            length = int.from_bytes(self.buf[0:3], "big")
            kind, flags = self.buf[3], self.buf[4]
            self._fill(9 + length)
            body = bytes(self.buf[9 : 9 + length])
            del self.buf[: 9 + length]
            if kind == _DATA and length:
                self.unacked += length
                if self.unacked > 1 << 20:  # give the window back now and then
                    inc = self.unacked.to_bytes(4, "big")
                    conn_update = b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + inc
                    stream_update = b"\x00\x00\x04\x08\x00" + self.sid.to_bytes(4, "big") + inc
                    self.sock.sendall(conn_update + stream_update)
                    self.unacked = 0
                return body[5:]  # drop the gRPC prefix (one message per frame here)
            if kind == _SETTINGS and not flags & 1:
                self.sock.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")  # SETTINGS ack
            elif kind == _PING and not flags & 1:
                self.sock.sendall(b"\x00\x00\x08\x06\x01\x00\x00\x00\x00" + body)
            elif kind in (_RST, _GOAWAY):
                raise ConnectionError("stream ended")


def floor_raw_frames(address: str, n: int) -> tuple[float, float]:
    resolve, predict = _envelopes()
    sock, conn, sid = _open(address)
    try:
        _h2_roundtrip(sock, conn, sid, _grpc_frame(resolve))  # h2 handles the opening
        reader = _RawReader(sock, sid)
        payload = _grpc_frame(predict)
        header = len(payload).to_bytes(3, "big") + b"\x00\x00" + sid.to_bytes(4, "big")
        frame = header + payload

        def one() -> None:
            sock.sendall(frame)
            reader.message()

        for _ in range(50):
            one()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            one()
        return (time.perf_counter() - w0) / n * 1e6, (time.process_time() - c0) / n * 1e6
    finally:
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[tuple[float, float]]] = {}
    with _servers.rlmesh_model() as server:
        for _ in range(args.repeat):
            rows.setdefault("F1 h2 library, blocking socket", []).append(
                floor_h2(server.address, args.n)
            )
            rows.setdefault("F2 hand-built DATA frames, blocking socket", []).append(
                floor_raw_frames(server.address, args.n)
            )
    print(f"{args.n} predict round trips per run, median of {args.repeat} (us per round trip)")
    print(f"{'floor':<46} {'wall':>8} {'client cpu':>11}")
    for name, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"{name:<46} {wall:8.0f} {cpu:11.0f}")


if __name__ == "__main__":
    main()
