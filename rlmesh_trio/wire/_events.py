"""What the client core reports after reading bytes: one small event per happening.

Plain ``__slots__`` classes rather than attrs ones: a route makes one
:class:`MessageReceived` per response, so construction cost matters. They
compare by value (tests assert on them) and never change after creation.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._grpc import GrpcStatus

__all__ = [
    "ConnectionTerminated",
    "Event",
    "MessageReceived",
    "PingAcknowledged",
    "ResponseHeaders",
    "StreamEnded",
    "StreamReset",
]


class Event:
    """Base of the core's events (value equality over ``__slots__``)."""

    __slots__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class ResponseHeaders(Event):
    """The response headers of a stream arrived (a Join server sends them at once)."""

    __slots__ = ("headers", "stream_id")

    def __init__(self, stream_id: int, headers: list[tuple[str, str]]) -> None:
        self.stream_id = stream_id
        self.headers = headers


class MessageReceived(Event):
    """One complete gRPC message (the protobuf bytes, without the 5-byte prefix)."""

    __slots__ = ("data", "stream_id")

    def __init__(self, stream_id: int, data: bytes) -> None:
        self.stream_id = stream_id
        self.data = data


class StreamEnded(Event):
    """The server ended the stream. ``status`` is ``None`` when it sent no ``grpc-status``."""

    __slots__ = ("message", "status", "stream_id")

    def __init__(self, stream_id: int, status: GrpcStatus | None, message: str | None) -> None:
        self.stream_id = stream_id
        self.status = status
        self.message = message


class StreamReset(Event):
    """The stream was reset (RST_STREAM from the peer, or by the core for bad framing)."""

    __slots__ = ("detail", "error_code", "stream_id")

    def __init__(self, stream_id: int, error_code: int, detail: str) -> None:
        self.stream_id = stream_id
        self.error_code = error_code
        self.detail = detail


class ConnectionTerminated(Event):
    """GOAWAY: streams above ``last_stream_id`` were never processed; no new streams."""

    __slots__ = ("additional_data", "error_code", "last_stream_id")

    def __init__(self, error_code: int, last_stream_id: int, additional_data: bytes) -> None:
        self.error_code = error_code
        self.last_stream_id = last_stream_id
        self.additional_data = additional_data


class PingAcknowledged(Event):
    """The peer answered one of our pings."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data
