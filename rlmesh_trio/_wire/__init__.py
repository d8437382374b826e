"""The I/O-free wire core: gRPC over HTTP/2 (h2's public API), Join demux, hand codecs.

Nothing here opens a socket or touches an event loop: bytes go in, events
come out (:class:`ClientCore`, :class:`ServerCore`), and the transport layer does the I/O.
"""

from typing import TYPE_CHECKING

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy): a client never
# loads the server core, and the CLI reads ServerLimits without h2.
if TYPE_CHECKING:
    from ._demux import JoinDemux, Undecodable, Waiter
    from ._events import (
        ConnectionTerminated,
        Event,
        MessageReceived,
        MessageRefused,
        PingAcknowledged,
        RequestEnded,
        RequestReceived,
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
    from ._h2server import ServerCore
    from ._limits import ServerLimits
    from ._registry import HAND_DECODERS, HAND_ENCODERS, encode_env_reply
    from ._skim import parse as parse_message
else:
    from .._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._demux": ("JoinDemux", "Undecodable", "Waiter"),
            "._events": (
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
            ),
            "._grpc": (
                "MAX_MESSAGE_BYTES",
                "FramingError",
                "GrpcError",
                "GrpcStatus",
                "MessageReader",
                "check_size",
                "frame",
                "request_headers",
            ),
            "._h2core": ("ClientCore", "NotHttp2", "ProtocolFailure"),
            "._h2server": ("ServerCore",),
            "._limits": ("ServerLimits",),
            "._registry": ("HAND_DECODERS", "HAND_ENCODERS", "encode_env_reply"),
            "._skim": {"parse_message": "parse"},
        },
    )

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
    "MessageRefused",
    "NotHttp2",
    "PingAcknowledged",
    "ProtocolFailure",
    "RequestEnded",
    "RequestReceived",
    "ResponseHeaders",
    "ServerCore",
    "ServerLimits",
    "StreamEnded",
    "StreamReset",
    "Undecodable",
    "Waiter",
    "check_size",
    "encode_env_reply",
    "frame",
    "parse_message",
    "request_headers",
]
