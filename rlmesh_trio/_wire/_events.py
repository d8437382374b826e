"""What the client core reports after reading bytes: one small event per happening.

Slotted dataclasses, not frozen ones: a route makes one :class:`MessageReceived`
per response and a frozen dataclass's ``__init__`` costs several times more.
They compare by value (tests assert on them) and are never changed after creation.
"""

from __future__ import annotations

import dataclasses

from ._grpc import GrpcStatus

__all__ = [
    "ConnectionTerminated",
    "Event",
    "MessageReceived",
    "MessageRefused",
    "PingAcknowledged",
    "RequestEnded",
    "RequestReceived",
    "ResponseHeaders",
    "StreamEnded",
    "StreamReset",
]


class Event:
    """Base of the core's events."""

    __slots__ = ()


@dataclasses.dataclass(slots=True)
class ResponseHeaders(Event):
    """The response headers of a stream arrived (a Join server sends them at once)."""

    stream_id: int
    headers: list[tuple[str, str]]


@dataclasses.dataclass(slots=True)
class MessageReceived(Event):
    """One complete gRPC message (the protobuf bytes, without the 5-byte prefix)."""

    stream_id: int
    data: bytes


@dataclasses.dataclass(slots=True)
class StreamEnded(Event):
    """The server ended the stream. ``status`` is ``None`` when it sent no ``grpc-status``."""

    stream_id: int
    status: GrpcStatus | None
    message: str | None


@dataclasses.dataclass(slots=True)
class StreamReset(Event):
    """The stream was reset (RST_STREAM from the peer, or by the core for bad framing)."""

    stream_id: int
    error_code: int
    detail: str


@dataclasses.dataclass(slots=True)
class ConnectionTerminated(Event):
    """GOAWAY: streams above ``last_stream_id`` were never processed; no new streams."""

    error_code: int
    last_stream_id: int
    additional_data: bytes


@dataclasses.dataclass(slots=True)
class PingAcknowledged(Event):
    """The peer answered one of our pings."""

    data: bytes


@dataclasses.dataclass(slots=True)
class RequestReceived(Event):
    """Server side: a client opened a stream with these request headers."""

    stream_id: int
    headers: list[tuple[str, str]]


@dataclasses.dataclass(slots=True)
class RequestEnded(Event):
    """Server side: the client half-closed the stream (no more messages from it)."""

    stream_id: int


@dataclasses.dataclass(slots=True)
class MessageRefused(Event):
    """Server side: a message the stream could not take (over the size limit, over the
    in-flight budget, compressed); its input is dropped from here on. The handler
    ends the stream with ``status`` once its in-flight work is answered."""

    stream_id: int
    status: GrpcStatus
    message: str
