"""The I/O-free wire core: gRPC over HTTP/2 (h2's public API), Join demux, hand codecs.

Nothing here opens a socket or touches an event loop: bytes go in, events
come out (:class:`ClientCore`), and the transport layer does the I/O.
"""

from ._demux import JoinDemux, Undecodable, Waiter
from ._events import (
    ConnectionTerminated,
    Event,
    MessageReceived,
    PingAcknowledged,
    ResponseHeaders,
    StreamEnded,
    StreamReset,
)
from ._grpc import (
    MAX_MESSAGE_BYTES,
    FramingError,
    GrpcError,
    GrpcStatus,
    MessageReader,
    check_size,
    frame,
    request_headers,
)
from ._h2core import ClientCore, NotHttp2, ProtocolFailure
from ._registry import HAND_DECODERS, HAND_ENCODERS

__all__ = [
    "HAND_DECODERS",
    "HAND_ENCODERS",
    "MAX_MESSAGE_BYTES",
    "ClientCore",
    "ConnectionTerminated",
    "Event",
    "FramingError",
    "GrpcError",
    "GrpcStatus",
    "JoinDemux",
    "MessageReader",
    "MessageReceived",
    "NotHttp2",
    "PingAcknowledged",
    "ProtocolFailure",
    "ResponseHeaders",
    "StreamEnded",
    "StreamReset",
    "Undecodable",
    "Waiter",
    "check_size",
    "frame",
    "request_headers",
]
