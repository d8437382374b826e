"""Hand-rolled protobuf for the model server's hot path: Predict in, Predict out.

betterproto2 spends 100+ µs parsing one ``JoinRequest`` and as much encoding
one ``JoinResponse`` (a reflective walk over every field), several times the
cost of the predict itself. A served route sends one Predict per step, so
this module decodes a ``JoinRequest`` carrying ``predict`` and encodes a
``JoinResponse`` carrying ``predict`` directly, producing the same message
objects and the same bytes betterproto2 would. Every other shape -- another
``oneof`` arm, unknown fields, a repeated singular field, an unexpected wire
type -- falls back to betterproto2, so correctness never depends on this
module being complete. ``tests/test_model_server_fastwire.py`` checks both
directions against betterproto2 over generated messages.
"""

from __future__ import annotations

from typing import Any

from .._wire import model_pb
from ._pbwire import (
    Fallback,
    blob,
    decode_space_value,
    fields,
    put_len,
    put_space_value,
    put_varint,
    signed64,
    text,
)

__all__ = ["decode_join_request", "encode_join_response"]

# ---------------------------------------------------------------------- decoding


def _context(data: bytes) -> model_pb.AdapterContext:
    texts = ["", "", ""]
    seen = 0
    for number, _wire, value in fields(data):
        if not 1 <= number <= 3 or seen & (1 << number):
            raise Fallback
        seen |= 1 << number
        texts[number - 1] = text(value)
    return model_pb.AdapterContext(session_id=texts[0], env_id=texts[1], request_id=texts[2])


def _episode_info(data: bytes) -> model_pb.EpisodeInfo:
    episode_id = ""
    seed: int | None = None
    seen = 0
    for number, _wire, value in fields(data):
        if number > 2 or seen & (1 << number):
            raise Fallback
        seen |= 1 << number
        if number == 1:
            episode_id = text(value)
        elif isinstance(value, int):
            seed = signed64(value)
        else:
            raise Fallback
    return model_pb.EpisodeInfo(episode_id=episode_id, seed=seed)


def _predict(data: bytes) -> model_pb.PredictRequest:
    context = None
    observation = None
    infos = []
    for number, _wire, value in fields(data):
        if number == 3:
            infos.append(_episode_info(blob(value)))
        elif number == 1 and context is None:
            context = _context(blob(value))
        elif number == 2 and observation is None:
            observation = decode_space_value(blob(value))
        else:
            raise Fallback
    return model_pb.PredictRequest(context=context, observation=observation, episode_info=infos)


def decode_join_request(data: bytes) -> model_pb.JoinRequest:
    """Parse a model ``JoinRequest``; fast for ``predict``, betterproto2 for the rest.

    Raises whatever betterproto2 raises for bytes it cannot parse.
    """
    try:
        request_id = ""
        predict = None
        for number, _wire, value in fields(data):
            if number == 2 and predict is None:
                predict = _predict(blob(value))
            elif number == 5 and not request_id:
                request_id = text(value)
            else:
                raise Fallback
        if predict is not None:
            return model_pb.JoinRequest(request_id=request_id, predict=predict)
    except Fallback:
        pass
    return model_pb.JoinRequest.parse(data)


# ---------------------------------------------------------------------- encoding


def _encode_context(context: model_pb.AdapterContext) -> bytearray:
    if context._unknown_fields:
        raise Fallback
    out = bytearray()
    for tag, field_text in (
        (0x0A, context.session_id),
        (0x12, context.env_id),
        (0x1A, context.request_id),
    ):
        if field_text:
            put_len(out, tag, field_text.encode())
    return out


def _encode_predict(predict: model_pb.PredictResponse) -> bytearray:
    if predict._unknown_fields:
        raise Fallback
    out = bytearray()
    if predict.context is not None:
        put_len(out, 0x0A, _encode_context(predict.context))
    for frame in predict.actions:
        put_space_value(out, 0x12, frame)
    return out


_OTHER_ARMS = (
    "resolve_adapter",
    "release_adapter",
    "close",
    "grouped_predict",
    "reset_adapter",
    "error",
)
#: The additive uint64 counters of 0.1.0 (fields 11-15, 17, 18), as (varint key, name).
_COUNTERS = tuple(
    (
        bytes([(number << 3) & 0x7F | 0x80, number >> 4]) if number >= 16 else bytes([number << 3]),
        name,
    )
    for number, name in (
        (11, "decode_ns"),
        (12, "user_ns"),
        (13, "encode_ns"),
        (14, "adapter_ns"),
        (15, "in_flight"),
        (17, "held_episodes"),
        (18, "held_bytes"),
    )
)


def encode_join_response(response: model_pb.JoinResponse) -> bytes:
    """Serialise a model ``JoinResponse``; fast for ``predict``, betterproto2 for the rest."""
    predict = response.predict
    if predict is not None and not response._unknown_fields and _only_predict(response):
        try:
            out = bytearray()
            put_len(out, 0x12, _encode_predict(predict))
            if response.request_id:
                put_len(out, 0x2A, response.request_id.encode())
            if response.endpoint_total_ns is not None:
                out.append(0x30)
                put_varint(out, response.endpoint_total_ns)
            for key, name in _COUNTERS:
                value = getattr(response, name)
                if value:
                    out += key
                    put_varint(out, value)
            return bytes(out)
        except Fallback:
            pass
    return bytes(response)


def _only_predict(response: Any) -> bool:
    for name in _OTHER_ARMS:
        if getattr(response, name) is not None:
            return False
    return True
