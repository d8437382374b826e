"""HTTP/2 frames the core builds and reads itself: DATA and WINDOW_UPDATE (RFC 9113 §6).

Every hot-path gRPC message is one DATA frame; through h2's state machine that
costs tens of microseconds a frame, and the 9-byte header is trivial to write.
"""

from __future__ import annotations

__all__ = [
    "DATA",
    "END_STREAM",
    "PADDED",
    "WINDOW_UPDATE",
    "FrameSplitter",
    "data_frame_header",
    "window_update",
]

HEADER_SIZE = 9
DATA = 0x0
WINDOW_UPDATE = 0x8
END_STREAM = 0x1
PADDED = 0x8
_STREAM_MASK = 0x7FFFFFFF


def data_frame_header(stream_id: int, length: int) -> bytes:
    """The 9-byte header of a DATA frame carrying ``length`` bytes (no flags)."""
    return length.to_bytes(3, "big") + b"\x00\x00" + stream_id.to_bytes(4, "big")


def window_update(stream_id: int, increment: int) -> bytes:
    """A WINDOW_UPDATE frame granting ``increment`` bytes (1 .. 2**31 - 1)."""
    return b"\x00\x00\x04\x08\x00" + stream_id.to_bytes(4, "big") + increment.to_bytes(4, "big")


class FrameSplitter:
    """Cuts the bytes read from a connection into whole frames, keeping a partial one."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def partial(self) -> bool:
        """Whether part of a frame is waiting for the rest."""
        return bool(self._buffer)

    def feed(self, data: bytes) -> tuple[bytes, list[tuple[int, int, int, int, int]]]:
        """``(buffer, frames)``: each frame as (type, flags, stream id, start, end) in ``buffer``.

        ``start`` is the frame's first byte (its header), ``end`` one past its payload.
        """
        if self._buffer:
            data = self._buffer + data
        frames: list[tuple[int, int, int, int, int]] = []
        pos, size = 0, len(data)
        while size - pos >= HEADER_SIZE:
            length = int.from_bytes(data[pos : pos + 3], "big")
            end = pos + HEADER_SIZE + length
            if end > size:
                break
            stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & _STREAM_MASK
            frames.append((data[pos + 3], data[pos + 4], stream_id, pos, end))
            pos = end
        self._buffer = data[pos:] if pos < size else b""
        return data, frames
