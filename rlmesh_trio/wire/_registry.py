"""One codec registry: the hand codecs for the hot Join messages, betterproto2 for the rest.

:func:`encode` and :func:`decode` are what the transport calls; which codec
runs is decided here, by message type, so callers never pick one themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import betterproto2

from .._wire import env_pb, model_pb
from . import _client_codec, _env_codec, _model_codec

__all__ = ["decode", "encode", "encode_join"]

M = TypeVar("M", bound=betterproto2.Message)

_DECODERS: dict[type, Callable[[bytes], Any]] = {
    env_pb.JoinResponse: _client_codec.decode_env_response,
    model_pb.JoinResponse: _client_codec.decode_model_response,
    env_pb.JoinRequest: _env_codec.decode_join_request,
    model_pb.JoinRequest: _model_codec.decode_join_request,
}
_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    env_pb.JoinResponse: _env_codec.encode_join_response,
    model_pb.JoinResponse: _model_codec.encode_join_response,
}


def decode(message_type: type[M], data: bytes) -> M:
    """Parse ``data`` as ``message_type`` (a hand codec when there is one).

    Raises:
        Exception: whatever betterproto2 raises for bytes it cannot parse.
    """
    decoder = _DECODERS.get(message_type)
    if decoder is not None:
        return decoder(data)  # type: ignore[no-any-return]
    return message_type.parse(data)


def encode(message: betterproto2.Message) -> bytes:
    """Serialise ``message`` (a hand codec when there is one)."""
    encoder = _ENCODERS.get(type(message))
    if encoder is not None:
        return encoder(message)
    return bytes(message)


def encode_join(request_id: str, message: env_pb.JoinRequest | model_pb.JoinRequest) -> bytes:
    """A Join request with ``request_id`` set; the hot arms (step, predict) by hand."""
    if isinstance(message, env_pb.JoinRequest):
        if message.step is not None:
            return _client_codec.encode_env_step(request_id, message.step)
    elif message.predict is not None:
        return _client_codec.encode_model_predict(request_id, message.predict)
    elif message.grouped_predict is not None:
        return _client_codec.encode_model_grouped_predict(
            request_id, list(message.grouped_predict.groups)
        )
    message.request_id = request_id
    return bytes(message)
