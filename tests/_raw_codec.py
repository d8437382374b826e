"""A pass-through grpclib codec, for tests and tools that drive our servers with grpclib.

The clients no longer use grpclib (they run on :mod:`rlmesh_trio._wire` and
Trio sockets); :func:`check_size` lives in the wire core and is re-exported.
"""

from __future__ import annotations

from typing import Any

from grpclib.encoding.base import CodecBase

from rlmesh_trio._wire import check_size

__all__ = ["RawCodec", "check_size"]


class RawCodec(CodecBase):
    """Pass bytes through untouched: messages are encoded and parsed by the caller."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> bytes:
        return bytes(data)
