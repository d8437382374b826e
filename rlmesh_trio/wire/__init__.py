"""Deprecated: the wire core is private now (``rlmesh_trio._wire``).

Only ``ServerLimits`` was ever meant for users; it lives at ``rlmesh_trio.ServerLimits``.
Every name the old public ``rlmesh_trio.wire`` exported still reads from here,
with a ``DeprecationWarning``, until the release in ``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from .._deprecated import moved_names

_OLD_NAMES = (
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
    "StreamEnded",
    "StreamReset",
    "Undecodable",
    "Waiter",
    "check_size",
    "encode_env_reply",
    "frame",
    "parse_message",
    "request_headers",
)

__all__: list[str] = []

__getattr__, __dir__ = moved_names(
    __name__,
    {"ServerLimits": "rlmesh_trio", **dict.fromkeys(_OLD_NAMES, "rlmesh_trio._wire")},
    listed=lambda: sorted(__all__),
)
