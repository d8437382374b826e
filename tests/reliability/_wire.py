"""A raw HTTP/2 client connection for the hostile-client matrix: frames out, reactions in.

Frames are built with hyperframe and header blocks with hpack, so an attack can
send what no well-behaved client library would (a frame header with no payload,
garbage HPACK, a window past 2^31-1). What the server answers is parsed as it
arrives: a GOAWAY's error code, RST_STREAM codes, ``grpc-status`` values, the
connection window it grants, and whether it closed the connection or stopped
reading (a send that stays blocked past ``SEND_STALL``: backpressure, which
counts as a reaction too).
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterable

import attrs
import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: A send blocked this long means the server stopped reading this connection.
SEND_STALL = 2.0
CONNECT_TIMEOUT = 3.0
#: HTTP/2's initial connection flow-control window, before any WINDOW_UPDATE.
INITIAL_WINDOW = 65_535


def grpc_request_block(path: str) -> bytes:
    """The HPACK block of a gRPC request's headers (static-table and literal entries only,
    so the same bytes are valid again on every stream of the connection)."""
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    return hpack.Encoder().encode(headers)


def headers(stream_id: int, block: bytes, *, end_headers: bool = True) -> bytes:
    flags = ["END_HEADERS"] if end_headers else []
    return HeadersFrame(stream_id, data=block, flags=flags).serialize()  # type: ignore[no-any-return]


def continuation(stream_id: int, block: bytes, *, end_headers: bool = False) -> bytes:
    flags = ["END_HEADERS"] if end_headers else []
    return ContinuationFrame(stream_id, data=block, flags=flags).serialize()  # type: ignore[no-any-return]


def data(stream_id: int, payload: bytes = b"", *, end_stream: bool = False) -> bytes:
    flags = ["END_STREAM"] if end_stream else []
    return DataFrame(stream_id, data=payload, flags=flags).serialize()  # type: ignore[no-any-return]


def rst(stream_id: int, code: int = 0x8) -> bytes:
    return RstStreamFrame(stream_id, error_code=code).serialize()  # type: ignore[no-any-return]


def window_update(stream_id: int, increment: int) -> bytes:
    return WindowUpdateFrame(stream_id, window_increment=increment).serialize()  # type: ignore[no-any-return]


def raw_header(length: int, frame_type: int, flags: int, stream_id: int) -> bytes:
    """A bare 9-byte frame header (the payload it announces is up to the caller)."""
    return length.to_bytes(3, "big") + bytes([frame_type, flags]) + stream_id.to_bytes(4, "big")


def grpc_prefix(length: int, compressed: bool = False) -> bytes:
    return bytes([int(compressed)]) + length.to_bytes(4, "big")


@attrs.define
class Conn:
    """One client connection on loopback; every server reaction seen is recorded."""

    sock: socket.socket
    goaway: int | None = None
    rst_codes: list[int] = attrs.Factory(list)
    statuses: list[int] = attrs.Factory(list)
    closed: bool = False
    stalled: bool = False
    sent: int = 0
    #: The connection window the server granted (WINDOW_UPDATEs on stream 0, summed).
    credit: int = 0
    _inbox: bytearray = attrs.Factory(bytearray)
    _decoder: hpack.Decoder = attrs.Factory(hpack.Decoder)

    @classmethod
    def open(cls, port: int, *, preface: bool = True) -> Conn:
        sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
        sock.settimeout(SEND_STALL)
        conn = cls(sock)
        if preface:
            conn.send(PREFACE + SettingsFrame(0).serialize())
        return conn

    @property
    def reacted(self) -> bool:
        return self.goaway is not None or self.closed or self.stalled or bool(self.rst_codes)

    @property
    def ended(self) -> bool:
        """The server is done with this connection (nothing more can be sent usefully)."""
        return self.goaway is not None or self.closed or self.stalled

    def send(self, payload: bytes) -> bool:
        """Send everything, or stop at the first sign the server is done; ``True`` if sent."""
        if self.ended:
            return False
        try:
            self.sock.sendall(payload)
        except TimeoutError:
            self.stalled = True
            return False
        except OSError:
            self.closed = True
            return False
        self.sent += len(payload)
        return True

    def pump(self, wait: float = 0.0) -> None:
        """Read what has arrived (waiting up to ``wait`` seconds for something)."""
        deadline = time.monotonic() + wait
        while not self.closed:
            left = max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.sock], [], [], left)
            if not readable:
                return
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                return
            self._inbox += chunk
            self._parse()
            if self.goaway is not None:
                return

    def await_reaction(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        while not self.reacted and time.monotonic() < deadline:
            self.pump(deadline - time.monotonic())

    def _parse(self) -> None:
        while len(self._inbox) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self._inbox[:9]))
            if len(self._inbox) < 9 + length:
                return
            frame.parse_body(memoryview(self._inbox[9 : 9 + length]))
            del self._inbox[: 9 + length]
            self._note(frame)

    def _note(self, frame: Frame) -> None:
        if isinstance(frame, GoAwayFrame):
            self.goaway = frame.error_code
        elif isinstance(frame, RstStreamFrame):
            self.rst_codes.append(frame.error_code)
        elif isinstance(frame, WindowUpdateFrame) and frame.stream_id == 0:
            self.credit += frame.window_increment
        elif isinstance(frame, HeadersFrame) and "END_HEADERS" in frame.flags:
            with contextlib.suppress(Exception):  # a reaction is what matters, not its text
                for name, value in self._decoder.decode(frame.data, raw=True):
                    if name == b"grpc-status":
                        self.statuses.append(int(value))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def await_reactions(conns: Iterable[Conn], wait: float) -> None:
    """Read every connection until each has reacted or ``wait`` seconds passed (in all)."""
    pending, deadline = list(conns), time.monotonic() + wait
    while pending and time.monotonic() < deadline:
        readable, _, _ = select.select([c.sock for c in pending], [], [], 0.05)
        for conn in pending:
            if conn.sock in readable:
                conn.pump()
        pending = [conn for conn in pending if not conn.reacted]
