"""gRPC over HTTP/2, the parts with no I/O: status codes, message framing, request headers.

A gRPC message on the wire is a 5-byte prefix (a compressed flag, then the
length as a big-endian uint32) and the protobuf bytes. Requests are HTTP/2
POSTs with ``content-type: application/grpc`` and ``te: trailers``; the
outcome is ``grpc-status`` (and a percent-encoded ``grpc-message``) in the
trailers, or in the response headers of a trailers-only response.
"""

from __future__ import annotations

import enum
import mmap
import urllib.parse
from collections.abc import Iterable, Mapping

from .._errors import ProtocolError
from .._protocol import MAX_MESSAGE_BYTES

__all__ = [
    "MAX_MESSAGE_BYTES",
    "FramingError",
    "GrpcError",
    "GrpcStatus",
    "MessageReader",
    "check_size",
    "frame",
    "request_headers",
    "status_from_headers",
]


class GrpcStatus(enum.IntEnum):
    """The gRPC status codes."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class GrpcError(Exception):
    """A call ended with a non-OK gRPC status."""

    def __init__(self, status: GrpcStatus, message: str | None = None) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{status.name}: {message}" if message else status.name)

    def __reduce__(self) -> tuple[type[GrpcError], tuple[GrpcStatus, str | None]]:
        return (type(self), (self.status, self.message))


#: Messages at least this large are assembled in a memory map of their own (MessageReader).
MAPPED_MESSAGE_BYTES = 1024 * 1024


class FramingError(ProtocolError):
    """Bytes that are not a valid gRPC message stream (compressed, too large, truncated)."""


def check_size(payload: bytes | bytearray, what: str) -> None:
    """Refuse a message a wire-v1 peer would reject for size.

    Raises:
        FramingError: ``payload`` is over 256 MiB.
    """
    if len(payload) > MAX_MESSAGE_BYTES:
        raise FramingError(
            f"{what} is {len(payload)} bytes, over the 256 MiB message limit of wire-v1 peers"
        )


def frame(payload: bytes | bytearray) -> bytes:
    """``payload`` as one uncompressed gRPC message (prefix and bytes)."""
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


class MessageReader:
    """Cuts gRPC messages out of a stream's DATA payloads, however they are split.

    Each 5-byte prefix is checked as soon as it is complete, before any of its
    message is kept: a message over ``limit`` raises at once. A message of
    :data:`MAPPED_MESSAGE_BYTES` or more is assembled in an anonymous memory map
    of exactly its declared size (pages are only taken as bytes arrive), not a
    growing ``bytearray``: its memory goes back to the system the moment the
    message is complete or abandoned, never into the allocator's heap, whose
    freed big chunks a process keeps (glibc raises its mmap threshold after each
    big free, so the next big buffers come from a heap it does not trim).
    """

    __slots__ = ("_buffer", "_mapped", "_mapped_at", "limit")

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._buffer = bytearray()
        self._mapped: mmap.mmap | None = None
        self._mapped_at = 0  # bytes of the mapped message (its prefix too) written
        self.limit = limit

    @property
    def partial(self) -> bool:
        """Whether part of a message is still waiting for the rest."""
        return bool(self._buffer) or self._mapped is not None

    @property
    def buffered(self) -> int:
        """Bytes kept for a message not complete yet."""
        return len(self._buffer) + self._mapped_at

    def feed(self, data: bytes) -> list[bytes]:
        """The messages ``data`` completes, in order.

        Raises:
            FramingError: a compressed message (no compression was negotiated)
                or one over the size limit.
        """
        if self._mapped is not None:
            return self._feed_mapped(self._mapped, data)
        buffer = self._buffer
        if buffer:
            # Appending keeps a large message's assembly linear (no copy per frame).
            buffer += data
            if len(buffer) < 5:
                return []
            size = self._check(buffer) + 5
            if size > len(buffer):
                if size >= MAPPED_MESSAGE_BYTES:
                    self._map(size, buffer)
                    buffer.clear()
                return []
            if size == len(buffer):
                # One whole message (a large one, usually): one copy out, not two.
                with memoryview(buffer) as view:
                    message = bytes(view[5:])
                buffer.clear()
                return [message]
            data = bytes(buffer)
            buffer.clear()
        out: list[bytes] = []
        pos, end = 0, len(data)
        while end - pos >= 5:
            size = self._check(data, pos)
            stop = pos + 5 + size
            if stop > end:
                if size + 5 >= MAPPED_MESSAGE_BYTES:
                    self._map(size + 5, data[pos:])
                    return out
                break
            out.append(data[pos + 5 : stop])
            pos = stop
        if pos < end:
            buffer += data[pos:]
        return out

    def _map(self, size: int, start: bytes | bytearray) -> None:
        mapped = self._mapped = mmap.mmap(-1, size)
        mapped[: len(start)] = start
        self._mapped_at = len(start)

    def _feed_mapped(self, mapped: mmap.mmap, data: bytes) -> list[bytes]:
        at, room = self._mapped_at, len(mapped) - self._mapped_at
        if len(data) < room:
            mapped[at : at + len(data)] = data
            self._mapped_at += len(data)
            return []
        mapped[at:] = data[:room] if len(data) > room else data
        message = mapped[5:]
        mapped.close()
        self._mapped, self._mapped_at = None, 0
        if len(data) == room:
            return [message]
        return [message, *self.feed(data[room:])]

    def _check(self, data: bytes | bytearray, pos: int = 0) -> int:
        if data[pos]:
            raise FramingError("a compressed gRPC message (compression is not supported)")
        size = int.from_bytes(data[pos + 1 : pos + 5], "big")
        if size > self.limit:
            limit = "256 MiB" if self.limit == MAX_MESSAGE_BYTES else f"{self.limit}-byte"
            raise FramingError(f"a gRPC message of {size} bytes is over the {limit} limit")
        return size


def request_headers(
    path: str,
    authority: str,
    *,
    scheme: str = "http",
    metadata: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> list[tuple[str, str]]:
    """The HTTP/2 request headers of one gRPC call to ``path``."""
    headers = [
        (":method", "POST"),
        (":scheme", scheme),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("user-agent", "rlmesh-trio"),
    ]
    if timeout is not None:
        # At most 8 digits, as the spec requires: milliseconds, else whole seconds.
        millis = max(1, int(timeout * 1000))
        value = f"{millis}m" if millis < 10**8 else f"{min(int(timeout), 10**8 - 1)}S"
        headers.append(("grpc-timeout", value))
    if metadata:
        headers.extend((name.lower(), value) for name, value in metadata.items())
    return headers


def status_from_headers(
    headers: Iterable[tuple[str, str]],
) -> tuple[GrpcStatus, str | None] | None:
    """``(status, message)`` from trailers (or trailers-only headers); ``None`` if absent.

    An unknown status number reads as ``UNKNOWN`` with a message saying so.
    """
    raw_status: str | None = None
    message: str | None = None
    for name, value in headers:
        if name == "grpc-status":
            raw_status = value
        elif name == "grpc-message":
            message = urllib.parse.unquote(value)
    if raw_status is None:
        return None
    try:
        return GrpcStatus(int(raw_status)), message
    except ValueError:
        return GrpcStatus.UNKNOWN, f"invalid grpc-status {raw_status!r}"
