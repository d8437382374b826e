"""Large gRPC messages sent the well-behaved way (h2's client, flow control obeyed).

The lies here are in the gRPC layer, not in HTTP/2: a 5-byte prefix that claims
more than the server accepts, or messages that are each legal but together far
more than a server should hold. The server is free to answer early (a status,
a reset, a GOAWAY) or to hold the sender off by not reopening its windows;
``WINDOW_STALL`` seconds with no window and no answer end the attack as held off.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from typing import TYPE_CHECKING

import attrs
import h2.config
import h2.connection
import h2.events
import h2.exceptions

from ._wire import CONNECT_TIMEOUT, SEND_STALL

if TYPE_CHECKING:
    from ._attacks import Halt, Outcome

WINDOW_STALL = 3.0
CHUNK = 16_384


@attrs.define
class StreamsReport:
    sent: int = 0
    goaway: int | None = None
    rst_codes: list[int] = attrs.Factory(list)
    statuses: list[int] = attrs.Factory(list)
    closed: bool = False
    held_off: bool = False

    def outcome(self, out: Outcome) -> Outcome:
        out.connections, out.sent, out.units = 1, self.sent, self.sent
        out.goaways += [] if self.goaway is None else [self.goaway]
        out.rst_codes += self.rst_codes
        out.statuses += self.statuses
        out.closed += self.closed
        out.stalled += self.held_off
        out.unreacted += (
            not (self.goaway is not None or self.rst_codes or self.statuses or self.closed)
            and not self.held_off
        )
        return out


def _note(report: StreamsReport, events: list[h2.events.Event], done: set[int]) -> None:
    for event in events:
        if isinstance(event, h2.events.ConnectionTerminated):
            report.goaway = int(event.error_code or 0)
        elif isinstance(event, h2.events.StreamReset):
            report.rst_codes.append(int(event.error_code))
            done.add(event.stream_id)
        elif isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
            for name, value in event.headers:
                if name == b"grpc-status":
                    report.statuses.append(int(value))
                    done.add(event.stream_id)


def _receive(sock: socket.socket, conn: h2.connection.H2Connection, wait: float) -> list:
    readable, _, _ = select.select([sock], [], [], wait)
    if not readable:
        return []
    chunk = sock.recv(1 << 20)
    if not chunk:
        raise ConnectionResetError("closed by the server")
    events = conn.receive_data(chunk)
    if pending := conn.data_to_send():
        sock.sendall(pending)
    return events


def send_messages(
    port: int, path: str, prefixes: list[bytes], body: int, halt: Halt
) -> StreamsReport:
    """Open one stream per prefix on one connection, send each prefix and then ``body``
    bytes on every stream, round-robin, as fast as the windows allow."""
    report, done = StreamsReport(), set[int]()
    sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
    sock.settimeout(SEND_STALL)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    request = [(":method", "POST"), (":scheme", "http"), (":path", path),
               (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
               ("te", "trailers")]  # fmt: skip
    left: dict[int, int] = {}
    for prefix in prefixes:
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, request)
        conn.send_data(stream, prefix)
        left[stream] = body
    zeros, last_progress = bytes(CHUNK), time.monotonic()
    try:
        sock.sendall(conn.data_to_send())
        halt.started.set()
        while not halt.hard.is_set() and report.goaway is None:
            open_streams = [s for s, n in left.items() if n > 0 and s not in done]
            if not open_streams:
                break
            moved = False
            for stream in open_streams:
                room = min(conn.local_flow_control_window(stream), CHUNK, left[stream])
                if room > 0:
                    conn.send_data(stream, zeros[:room], end_stream=left[stream] == room)
                    left[stream] -= room
                    report.sent += room
                    moved = True
            if pending := conn.data_to_send():
                sock.sendall(pending)
            _note(report, _receive(sock, conn, 0.0 if moved else 0.05), done)
            if moved or done:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > WINDOW_STALL:
                report.held_off = True
                break
        deadline = time.monotonic() + 1.0
        while report.goaway is None and len(done) < len(left) and time.monotonic() < deadline:
            _note(report, _receive(sock, conn, 0.1), done)
    except TimeoutError:
        report.held_off = True
    except (OSError, h2.exceptions.H2Error):
        report.closed = True
    finally:
        with contextlib.suppress(OSError):
            sock.close()
    return report
