"""One codec registry: the hand codecs of the hot Join messages, by message type.

Every other message goes through betterproto2 (the health service's two tiny
messages are encoded by hand in ``transport/server/_health_service.py``). The servers'
codec looks the Join types up here; the client's Join sessions bind their reply
decoder (the one listed here) once per stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._protocol import env_pb, model_pb
from . import _client_codec, _env_codec, _model_codec

__all__ = ["HAND_DECODERS", "HAND_ENCODERS", "encode_env_reply"]

HAND_DECODERS: dict[type, Callable[[bytes], Any]] = {
    env_pb.JoinResponse: _client_codec.decode_env_response,
    model_pb.JoinResponse: _client_codec.decode_model_response,
    env_pb.JoinRequest: _env_codec.decode_join_request,
    model_pb.JoinRequest: _model_codec.decode_join_request,
}
HAND_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    env_pb.JoinResponse: _env_codec.encode_join_response,
    model_pb.JoinResponse: _model_codec.encode_join_response,
}
#: An env ``JoinResponse``'s bytes from its parts, for a server that has them apart:
#: (arm name, arm message, request_id, endpoint_total_ns, the additive counters in
#: ``decode_ns, user_ns, encode_ns, lane_skew_ns, queue_ns`` order).
encode_env_reply = _env_codec.encode_join_parts
