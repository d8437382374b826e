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

from .._wire import model_pb, spaces_pb

__all__ = ["decode_join_request", "encode_join_response"]

_U64 = (1 << 64) - 1


class _Fallback(Exception):
    """Not a hot shape: let betterproto2 handle it."""


# ---------------------------------------------------------------------- decoding


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Fallback
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs; only varint and length-delimited wire types."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise _Fallback
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise _Fallback
    return out


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise _Fallback
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Fallback from None


def _blob(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise _Fallback
    return value


def _context(data: bytes) -> model_pb.AdapterContext:
    texts = ["", "", ""]
    seen = 0
    for number, value in _fields(data):
        if not 1 <= number <= 3 or seen & (1 << number):
            raise _Fallback
        seen |= 1 << number
        texts[number - 1] = _text(value)
    return model_pb.AdapterContext(session_id=texts[0], env_id=texts[1], request_id=texts[2])


def _space_value(data: bytes) -> spaces_pb.SpaceValue:
    leaves = []
    for number, value in _fields(data):
        if number != 1:
            raise _Fallback
        leaves.append(_blob(value))
    return spaces_pb.SpaceValue(leaves=leaves)


def _episode_info(data: bytes) -> model_pb.EpisodeInfo:
    episode_id = ""
    seed: int | None = None
    seen = 0
    for number, value in _fields(data):
        if seen & (1 << number):
            raise _Fallback
        seen |= 1 << number
        if number == 1:
            episode_id = _text(value)
        elif number == 2 and isinstance(value, int):
            seed = value - (1 << 64) if value >= (1 << 63) else value
        else:
            raise _Fallback
    return model_pb.EpisodeInfo(episode_id=episode_id, seed=seed)


def _predict(data: bytes) -> model_pb.PredictRequest:
    context = None
    observation = None
    infos = []
    for number, value in _fields(data):
        if number == 3:
            infos.append(_episode_info(_blob(value)))
        elif number == 1 and context is None:
            context = _context(_blob(value))
        elif number == 2 and observation is None:
            observation = _space_value(_blob(value))
        else:
            raise _Fallback
    return model_pb.PredictRequest(context=context, observation=observation, episode_info=infos)


def decode_join_request(data: bytes) -> model_pb.JoinRequest:
    """Parse a model ``JoinRequest``; fast for ``predict``, betterproto2 for the rest.

    Raises whatever betterproto2 raises for bytes it cannot parse.
    """
    try:
        request_id = ""
        predict = None
        for number, value in _fields(data):
            if number == 2 and predict is None:
                predict = _predict(_blob(value))
            elif number == 5 and not request_id:
                request_id = _text(value)
            else:
                raise _Fallback
        if predict is not None:
            return model_pb.JoinRequest(request_id=request_id, predict=predict)
    except _Fallback:
        pass
    return model_pb.JoinRequest.parse(data)


# ---------------------------------------------------------------------- encoding


def _put_varint(out: bytearray, value: int) -> None:
    value &= _U64
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_len(out: bytearray, tag: int, payload: bytes | bytearray) -> None:
    out.append(tag)  # every tag used here is one byte (field number < 16)
    _put_varint(out, len(payload))
    out += payload


def _encode_context(context: model_pb.AdapterContext) -> bytearray:
    if context._unknown_fields:
        raise _Fallback
    out = bytearray()
    for tag, text in (
        (0x0A, context.session_id),
        (0x12, context.env_id),
        (0x1A, context.request_id),
    ):
        if text:
            _put_len(out, tag, text.encode())
    return out


def _encode_predict(predict: model_pb.PredictResponse) -> bytearray:
    if predict._unknown_fields:
        raise _Fallback
    out = bytearray()
    if predict.context is not None:
        _put_len(out, 0x0A, _encode_context(predict.context))
    for frame in predict.actions:
        if frame._unknown_fields:
            raise _Fallback
        body = bytearray()
        for leaf in frame.leaves:
            _put_len(body, 0x0A, leaf)
        _put_len(out, 0x12, body)
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
            _put_len(out, 0x12, _encode_predict(predict))
            if response.request_id:
                _put_len(out, 0x2A, response.request_id.encode())
            if response.endpoint_total_ns is not None:
                out.append(0x30)
                _put_varint(out, response.endpoint_total_ns)
            for key, name in _COUNTERS:
                value = getattr(response, name)
                if value:
                    out += key
                    _put_varint(out, value)
            return bytes(out)
        except _Fallback:
            pass
    return bytes(response)


def _only_predict(response: Any) -> bool:
    for name in _OTHER_ARMS:
        if getattr(response, name) is not None:
            return False
    return True
