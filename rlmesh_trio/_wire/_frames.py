"""HTTP/2 frames the core builds and reads itself: DATA and WINDOW_UPDATE (RFC 9113 §6).

Every hot-path gRPC message is one DATA frame; through h2's state machine that
costs tens of microseconds a frame, and the 9-byte header is trivial to write.
"""

from __future__ import annotations

__all__ = [
    "CONTINUATION",
    "DATA",
    "END_HEADERS",
    "END_STREAM",
    "HEADERS",
    "PADDED",
    "PING",
    "RST_STREAM",
    "SETTINGS",
    "WINDOW_UPDATE",
    "FrameSplitter",
    "FrameTooLarge",
    "data_frame_header",
    "goaway",
    "window_update",
    "with_goaway_code",
]

HEADER_SIZE = 9
DATA = 0x0
HEADERS = 0x1
RST_STREAM = 0x3
SETTINGS = 0x4
PUSH_PROMISE = 0x5
PING = 0x6
WINDOW_UPDATE = 0x8
CONTINUATION = 0x9
END_STREAM = 0x1
END_HEADERS = 0x4
PADDED = 0x8
_STREAM_MASK = 0x7FFFFFFF


def data_frame_header(stream_id: int, length: int) -> bytes:
    """The 9-byte header of a DATA frame carrying ``length`` bytes (no flags)."""
    return length.to_bytes(3, "big") + b"\x00\x00" + stream_id.to_bytes(4, "big")


def window_update(stream_id: int, increment: int) -> bytes:
    """A WINDOW_UPDATE frame granting ``increment`` bytes (1 .. 2**31 - 1)."""
    return b"\x00\x00\x04\x08\x00" + stream_id.to_bytes(4, "big") + increment.to_bytes(4, "big")


GOAWAY = 0x7


def goaway(code: int, debug: bytes = b"", last_stream_id: int = 0) -> bytes:
    """A GOAWAY frame: ``code``, the last stream processed, and ``debug`` data (what the
    peer may show of why)."""
    payload = last_stream_id.to_bytes(4, "big") + code.to_bytes(4, "big") + debug
    return len(payload).to_bytes(3, "big") + bytes([GOAWAY, 0]) + b"\x00\x00\x00\x00" + payload


def with_goaway_code(data: bytes, code: int) -> bytes:
    """``data`` (whole frames) with every GOAWAY's error code set to ``code``; a
    truncated frame at the end is left as it is."""
    out = bytearray(data)
    pos = 0
    while len(out) - pos >= HEADER_SIZE:
        end = pos + HEADER_SIZE + int.from_bytes(out[pos : pos + 3], "big")
        if end > len(out):
            break
        if out[pos + 3] == GOAWAY and end - pos >= HEADER_SIZE + 8:
            out[pos + HEADER_SIZE + 4 : pos + HEADER_SIZE + 8] = code.to_bytes(4, "big")
        pos = end
    return bytes(out)


class FrameTooLarge(Exception):
    """A frame header announces more than our SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2)."""


class FrameSplitter:
    """Cuts the bytes read from a connection into whole frames, keeping a partial one.

    Each 9-byte header is checked before its payload is kept: a frame longer
    than ``max_frame`` raises :class:`FrameTooLarge`, so at most one frame's
    worth of bytes is ever buffered.
    """

    __slots__ = ("_buffer", "max_frame")

    def __init__(self, max_frame: int = 16384) -> None:
        self._buffer = b""
        self.max_frame = max_frame

    @property
    def partial(self) -> bool:
        """Whether part of a frame is waiting for the rest."""
        return bool(self._buffer)

    def feed(self, data: bytes) -> tuple[bytes, list[tuple[int, int, int, int, int]]]:
        """``(buffer, frames)``: each frame as (type, flags, stream id, start, end) in ``buffer``.

        ``start`` is the frame's first byte (its header), ``end`` one past its payload.

        Raises:
            FrameTooLarge: a header announces a frame over ``max_frame`` (the frames
                before it are lost with the connection).
        """
        if self._buffer:
            data = self._buffer + data
        frames: list[tuple[int, int, int, int, int]] = []
        pos, size = 0, len(data)
        while size - pos >= HEADER_SIZE:
            length = int.from_bytes(data[pos : pos + 3], "big")
            if length > self.max_frame:
                raise FrameTooLarge(f"a frame of {length} bytes is over our {self.max_frame}")
            end = pos + HEADER_SIZE + length
            if end > size:
                break
            stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & _STREAM_MASK
            frames.append((data[pos + 3], data[pos + 4], stream_id, pos, end))
            pos = end
        self._buffer = data[pos:] if pos < size else b""
        return data, frames
