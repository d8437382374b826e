"""Hand-rolled protobuf codec for the few Join messages on a route's hot path.

betterproto2 spends 40-120 µs per Join message here (a reflective walk over
every field, with a ``warnings`` context per default value); a route step
sends two such messages and receives two. This module encodes the step and
predict requests and decodes the step/reset/predict responses directly,
producing exactly the bytes (and exactly the message objects) betterproto2
would. Anything outside the hot shapes -- another ``oneof`` arm, unknown
fields, an unexpected wire type -- returns ``None`` (encode) or falls back to
betterproto2 (decode), so correctness never depends on this module being
complete. ``tests/test_transport_fastwire.py`` checks byte-for-byte and
object equality against betterproto2 over generated messages.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .._wire import env_pb, model_pb, spaces_pb

__all__ = [
    "decode_env_response",
    "decode_model_response",
    "encode_env_step",
    "encode_model_grouped_predict",
    "encode_model_predict",
]

_U64 = (1 << 64) - 1

# ---- encoding ----------------------------------------------------------------


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= _U64  # negative int64 -> two's complement, ten bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    return _varint(tag) + _varint(len(payload)) + payload


def _str_field(tag: int, text: str) -> bytes:
    return _len_field(tag, text.encode())


def _with_request_id(body: bytes, request_id: str) -> bytes:
    return body + _str_field(0x2A, request_id) if request_id else body


def _plain(message: Any) -> bool:
    """No unknown fields were carried along (those need betterproto2 to re-emit)."""
    return not message._unknown_fields


def _space_value(value: spaces_pb.SpaceValue) -> bytes | None:
    if not _plain(value):
        return None
    return b"".join(_len_field(0x0A, leaf) for leaf in value.leaves)


def encode_env_step(request_id: str, step: env_pb.StepRequest) -> bytes | None:
    """``JoinRequest{step, request_id}`` as betterproto2 encodes it; ``None`` if unusual."""
    if not _plain(step):
        return None
    parts = []
    if step.action is not None:
        action = _space_value(step.action)
        if action is None:
            return None
        parts.append(_len_field(0x0A, action))
    if step.timeout_ms:
        parts.append(b"\x10" + _varint(step.timeout_ms))
    if step.env_indices:
        parts.append(_len_field(0x1A, b"".join(_varint(i) for i in step.env_indices)))
    for episode_id in step.episode_ids:
        parts.append(_str_field(0x22, episode_id))
    return _with_request_id(_len_field(0x12, b"".join(parts)), request_id)


# A route's session and env ids, and an episode's id and seed, repeat on every step:
# their encodings are kept (bounded; cleared when full) instead of rebuilt per request.
_CACHE_LIMIT = 4096
_route_prefix: dict[tuple[str, str], bytes] = {}
_episode_info: dict[tuple[str, int | None], bytes] = {}


def _context(context: model_pb.AdapterContext) -> bytes | None:
    if not _plain(context):
        return None
    key = (context.session_id, context.env_id)
    prefix = _route_prefix.get(key)
    if prefix is None:
        if len(_route_prefix) >= _CACHE_LIMIT:
            _route_prefix.clear()
        prefix = _route_prefix[key] = (_str_field(0x0A, key[0]) if key[0] else b"") + (
            _str_field(0x12, key[1]) if key[1] else b""
        )
    if context.request_id:
        return prefix + _str_field(0x1A, context.request_id)
    return prefix


def _info(info: model_pb.EpisodeInfo) -> bytes:
    key = (info.episode_id, info.seed)
    body = _episode_info.get(key)
    if body is None:
        if len(_episode_info) >= _CACHE_LIMIT:
            _episode_info.clear()
        body = _str_field(0x0A, key[0]) if key[0] else b""
        if key[1] is not None:
            body += b"\x10" + _varint(key[1])
        body = _episode_info[key] = _len_field(0x1A, body)
    return body


def _predict_body(predict: model_pb.PredictRequest) -> bytes | None:
    if not _plain(predict):
        return None
    parts = []
    if predict.context is not None:
        context = _context(predict.context)
        if context is None:
            return None
        parts.append(_len_field(0x0A, context))
    if predict.observation is not None:
        observation = _space_value(predict.observation)
        if observation is None:
            return None
        parts.append(_len_field(0x12, observation))
    for info in predict.episode_info:
        if not _plain(info):
            return None
        parts.append(_info(info))
    return b"".join(parts)


def encode_model_predict(request_id: str, predict: model_pb.PredictRequest) -> bytes | None:
    """``JoinRequest{predict, request_id}`` as betterproto2 encodes it; ``None`` if unusual."""
    body = _predict_body(predict)
    if body is None:
        return None
    return _with_request_id(_len_field(0x12, body), request_id)


def encode_model_grouped_predict(
    request_id: str, groups: list[model_pb.PredictRequest]
) -> bytes | None:
    """``JoinRequest{grouped_predict{groups}, request_id}`` as betterproto2 encodes it."""
    parts = []
    for group in groups:
        body = _predict_body(group)
        if body is None:
            return None
        parts.append(_len_field(0x0A, body))
    return _with_request_id(_len_field(0x32, b"".join(parts)), request_id)


# ---- decoding ----------------------------------------------------------------


class _Fallback(Exception):
    """The fast decoder met something it does not handle: use betterproto2."""


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift, end = 0, 0, len(data)
    while True:
        if pos >= end or shift > 63:
            raise _Fallback
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _U64, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value): a varint int, or the bytes of a LEN field."""
    out: list[tuple[int, int, Any]] = []
    append = out.append
    pos, end = 0, len(data)
    while pos < end:
        # One-byte keys, sizes and values are the common case: read those inline.
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _read_varint(data, pos)
        wire = key & 7
        if wire == 2:
            if pos >= end:
                raise _Fallback
            size = data[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _read_varint(data, pos)
            stop = pos + size
            if stop > end:
                raise _Fallback
            append((key >> 3, 2, data[pos:stop]))
            pos = stop
        elif wire == 0:
            if pos >= end:
                raise _Fallback
            value = data[pos]
            if value < 0x80:
                pos += 1
            else:
                value, pos = _read_varint(data, pos)
            append((key >> 3, 0, value))
        else:
            raise _Fallback  # fixed-width fields: not on the fast shapes
    return out


def _decode_space_value(data: bytes) -> spaces_pb.SpaceValue:
    # Walked inline (every observation and action comes through here): only
    # field 1, LEN; anything else falls back.
    leaves = []
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] != 0x0A:
            raise _Fallback
        size = data[pos + 1]
        pos += 2
        if size >= 0x80:
            size, pos = _read_varint(data, pos - 1)
        stop = pos + size
        if stop > end:
            raise _Fallback
        leaves.append(data[pos:stop])
        pos = stop
    return spaces_pb.SpaceValue(leaves=leaves)


def _meta_map(data: bytes) -> spaces_pb.MetaMap:
    # infos are usually present but empty; skip the parser for those
    return spaces_pb.MetaMap.parse(data) if data else spaces_pb.MetaMap()


def _packed_varints(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        value, pos = _read_varint(data, pos)
        out.append(value)
    return out


def _decode_step(data: bytes) -> env_pb.StepResponse:
    observation = infos = None
    rewards: list[float] = []
    terminated = truncated = b""
    completed: list[env_pb.EpisodeMetadata] = []
    env_indices: list[int] = []
    for number, wire, value in _fields(data):
        if wire != 2:
            if number == 7 and wire == 0:
                env_indices.append(value)
                continue
            raise _Fallback
        if number == 1:
            if observation is not None:
                raise _Fallback  # a repeated singular message merges: leave it to betterproto2
            observation = _decode_space_value(value)
        elif number == 2:
            if len(value) % 8:
                raise _Fallback
            rewards.extend(struct.unpack(f"<{len(value) // 8}d", value))
        elif number == 3:
            terminated = value
        elif number == 4:
            truncated = value
        elif number == 5:
            if infos is not None:
                raise _Fallback
            infos = _meta_map(value)
        elif number == 6:
            completed.append(env_pb.EpisodeMetadata.parse(value))
        elif number == 7:
            env_indices.extend(_packed_varints(value))
        else:
            raise _Fallback
    return env_pb.StepResponse(
        observation=observation,
        rewards=rewards,
        terminated_mask=terminated,
        truncated_mask=truncated,
        infos=infos,
        completed_episodes=completed,
        env_indices=env_indices,
    )


def _decode_reset(data: bytes) -> env_pb.ResetResponse:
    observation = infos = None
    for number, wire, value in _fields(data):
        if wire != 2:
            raise _Fallback
        if number == 1 and observation is None:
            observation = _decode_space_value(value)
        elif number == 2 and infos is None:
            infos = _meta_map(value)
        else:
            raise _Fallback
    return env_pb.ResetResponse(observation=observation, infos=infos)


def _decode_context(data: bytes) -> model_pb.AdapterContext:
    text = {1: "", 2: "", 3: ""}
    for number, wire, value in _fields(data):
        if wire != 2 or number not in text:
            raise _Fallback
        text[number] = value.decode()
    return model_pb.AdapterContext(session_id=text[1], env_id=text[2], request_id=text[3])


def _decode_predict(data: bytes) -> model_pb.PredictResponse:
    context = None
    actions = []
    for number, wire, value in _fields(data):
        if wire != 2:
            raise _Fallback
        if number == 1 and context is None:
            context = _decode_context(value)
        elif number == 2:
            actions.append(_decode_space_value(value))
        else:
            raise _Fallback
    return model_pb.PredictResponse(context=context, actions=actions)


def _decode_grouped(data: bytes) -> model_pb.GroupedPredictResponse:
    results = []
    for number, wire, value in _fields(data):
        if number != 1 or wire != 2:
            raise _Fallback
        outcome = _fields(value)
        if len(outcome) != 1 or outcome[0][1] != 2:
            raise _Fallback  # empty, or both arms: leave the oneof rules to betterproto2
        arm, _wire, body = outcome[0]
        if arm == 1:
            results.append(model_pb.GroupedPredictResult(response=_decode_predict(body)))
        elif arm == 2:
            results.append(model_pb.GroupedPredictResult(error=model_pb.ModelError.parse(body)))
        else:
            raise _Fallback
    return model_pb.GroupedPredictResponse(results=results)


# envelope varint fields (besides endpoint_total_ns) by number
_ENV_COUNTERS = {
    11: "decode_ns",
    12: "user_ns",
    13: "encode_ns",
    14: "lane_skew_ns",
    15: "queue_ns",
}
_MODEL_COUNTERS = {
    11: "decode_ns",
    12: "user_ns",
    13: "encode_ns",
    14: "adapter_ns",
    15: "in_flight",
    17: "held_episodes",
    18: "held_bytes",
}


def _decode_envelope(
    data: bytes,
    arms: dict[int, tuple[str, Callable[[bytes], Any]]],
    counters: dict[int, str],
) -> dict[str, Any]:
    # Walked inline rather than through _fields: one envelope per response.
    kwargs: dict[str, Any] = {}
    arm_seen = False
    pos, end = 0, len(data)
    while pos < end:
        key = data[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _read_varint(data, pos - 1)
        number, wire = key >> 3, key & 7
        if wire == 2:
            size = data[pos]
            pos += 1
            if size >= 0x80:
                size, pos = _read_varint(data, pos - 1)
            stop = pos + size
            if stop > end:
                raise _Fallback
            if number == 5:
                kwargs["request_id"] = data[pos:stop].decode()
            elif number in arms and not arm_seen:
                name, decode = arms[number]
                kwargs[name] = decode(data[pos:stop])
                arm_seen = True
            else:
                raise _Fallback
            pos = stop
        elif wire == 0:
            value = data[pos]
            pos += 1
            if value >= 0x80:
                value, pos = _read_varint(data, pos - 1)
            if number == 6:
                kwargs["endpoint_total_ns"] = value
            elif number in counters:
                kwargs[counters[number]] = value
            else:
                raise _Fallback
        else:
            raise _Fallback
    if not arm_seen:
        raise _Fallback
    return kwargs


_ENV_ARMS: dict[int, tuple[str, Callable[[bytes], Any]]] = {
    1: ("reset", _decode_reset),
    2: ("step", _decode_step),
}
_MODEL_ARMS: dict[int, tuple[str, Callable[[bytes], Any]]] = {
    2: ("predict", _decode_predict),
    7: ("grouped_predict", _decode_grouped),
}


def decode_env_response(data: bytes) -> env_pb.JoinResponse:
    """Parse an env ``JoinResponse``; reset/step replies take the fast path."""
    try:
        return env_pb.JoinResponse(**_decode_envelope(data, _ENV_ARMS, _ENV_COUNTERS))
    except (_Fallback, IndexError, UnicodeDecodeError, struct.error):
        return env_pb.JoinResponse.parse(data)


def decode_model_response(data: bytes) -> model_pb.JoinResponse:
    """Parse a model ``JoinResponse``; predict and grouped-predict replies take the fast path."""
    try:
        return model_pb.JoinResponse(**_decode_envelope(data, _MODEL_ARMS, _MODEL_COUNTERS))
    except (_Fallback, IndexError, UnicodeDecodeError, struct.error):
        return model_pb.JoinResponse.parse(data)
