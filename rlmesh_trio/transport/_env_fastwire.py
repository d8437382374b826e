"""Hand-rolled protobuf for the env server's hot path: Step/Reset in, Step/Reset out.

A served route sends one Step (and a Reset per episode) per step, and
betterproto2 spends 60-80 µs decoding the request and encoding the reply
(mostly a reflective walk over every field with a ``warnings`` context per
default value). This module decodes a ``JoinRequest`` carrying ``step`` or
``reset`` and encodes a ``JoinResponse`` carrying ``step`` or ``reset``
directly, producing the same message objects and the same bytes
betterproto2 would. Every other shape -- another ``oneof`` arm, unknown
fields, a repeated singular field, an unexpected wire type, an out-of-range
``uint32`` -- falls back to betterproto2. ``tests/test_env_server_fastwire.py``
checks both directions against betterproto2 over generated messages.
"""

from __future__ import annotations

import struct
from typing import Any

import betterproto2

from .._wire import env_pb, spaces_pb
from ._pbwire import (
    Fallback,
    blob,
    decode_space_value,
    fields,
    packed_varints,
    put_len,
    put_space_value,
    put_varint,
    signed64,
    text,
)

__all__ = ["decode_join_request", "encode_join_response"]

_U32 = (1 << 32) - 1

# ---------------------------------------------------------------------- decoding


def _indices(wire: int, value: int | bytes, into: list[int]) -> None:
    """``repeated uint32``: packed or one value per field."""
    values = packed_varints(value) if isinstance(value, bytes) else [value]
    for index in values:
        if index > _U32:
            raise Fallback  # leave the truncation rules to betterproto2
        into.append(index)


def _meta_map(data: bytes) -> spaces_pb.MetaMap:
    # Options are usually absent or empty; only a non-empty map needs the parser.
    return spaces_pb.MetaMap.parse(data) if data else spaces_pb.MetaMap()


def _step(data: bytes) -> env_pb.StepRequest:
    action = None
    timeout_ms = 0
    env_indices: list[int] = []
    episode_ids: list[str] = []
    seen = 0
    for number, wire, value in fields(data):
        if number == 1 and wire == 2 and action is None:
            action = decode_space_value(blob(value))
        elif number == 2 and wire == 0 and not seen & 4:
            seen |= 4
            assert isinstance(value, int)
            timeout_ms = value
        elif number == 3:
            _indices(wire, value, env_indices)
        elif number == 4 and wire == 2:
            episode_ids.append(text(value))
        else:
            raise Fallback
    return env_pb.StepRequest(
        action=action, timeout_ms=timeout_ms, env_indices=env_indices, episode_ids=episode_ids
    )


def _reset(data: bytes) -> env_pb.ResetRequest:
    seeds: list[int] = []
    options = None
    timeout_ms = 0
    env_indices: list[int] = []
    episode_ids: list[str] = []
    seen = 0
    for number, wire, value in fields(data):
        if number == 1:
            raw = packed_varints(value) if isinstance(value, bytes) else [value]
            seeds.extend(signed64(seed) for seed in raw)
        elif number == 2 and wire == 2 and options is None:
            options = _meta_map(blob(value))
        elif number == 3 and wire == 0 and not seen & 8:
            seen |= 8
            assert isinstance(value, int)
            timeout_ms = value
        elif number == 4:
            _indices(wire, value, env_indices)
        elif number == 5 and wire == 2:
            episode_ids.append(text(value))
        else:
            raise Fallback
    return env_pb.ResetRequest(
        seeds=seeds,
        options=options,
        timeout_ms=timeout_ms,
        env_indices=env_indices,
        episode_ids=episode_ids,
    )


def decode_join_request(data: bytes) -> env_pb.JoinRequest:
    """Parse an env ``JoinRequest``; fast for ``step`` and ``reset``, betterproto2 otherwise.

    Raises whatever betterproto2 raises for bytes it cannot parse.
    """
    try:
        request_id: str | None = None
        arm: tuple[str, Any] | None = None
        for number, wire, value in fields(data):
            if wire != 2:
                raise Fallback
            if number == 5 and request_id is None:
                request_id = text(value)
            elif number == 2 and arm is None:
                arm = ("step", _step(blob(value)))
            elif number == 1 and arm is None:
                arm = ("reset", _reset(blob(value)))
            else:
                raise Fallback
        if arm is not None:
            return env_pb.JoinRequest(request_id=request_id or "", **{arm[0]: arm[1]})
    except (Fallback, struct.error):
        pass
    return env_pb.JoinRequest.parse(data)


# ---------------------------------------------------------------------- encoding


def _plain(message: Any) -> None:
    if message._unknown_fields:
        raise Fallback


def _put_message(out: bytearray, tag: int, message: Any) -> None:
    """A sub-message through betterproto2 (the rare, structured ones: infos, episodes)."""
    put_len(out, tag, bytes(message))


def _put_infos(out: bytearray, tag: int, infos: spaces_pb.MetaMap) -> None:
    if not infos.entries and not infos._unknown_fields:
        out.append(tag)
        out.append(0)
    else:
        _put_message(out, tag, infos)


def _put_packed(out: bytearray, tag: int, values: list[int]) -> None:
    body = bytearray()
    for value in values:
        put_varint(body, value)
    put_len(out, tag, body)


def _encode_step(step: env_pb.StepResponse) -> bytearray:
    _plain(step)
    out = bytearray()
    if step.observation is not None:
        put_space_value(out, 0x0A, step.observation)
    if step.rewards:
        put_len(out, 0x12, struct.pack(f"<{len(step.rewards)}d", *step.rewards))
    if step.terminated_mask:
        put_len(out, 0x1A, step.terminated_mask)
    if step.truncated_mask:
        put_len(out, 0x22, step.truncated_mask)
    if step.infos is not None:
        _put_infos(out, 0x2A, step.infos)
    for episode in step.completed_episodes:
        _put_message(out, 0x32, episode)
    if step.env_indices:
        _put_packed(out, 0x3A, step.env_indices)
    return out


def _encode_reset(reset: env_pb.ResetResponse) -> bytearray:
    _plain(reset)
    out = bytearray()
    if reset.observation is not None:
        put_space_value(out, 0x0A, reset.observation)
    if reset.infos is not None:
        _put_infos(out, 0x12, reset.infos)
    return out


#: The additive uint64 counters (fields 11-15) as (one-byte key, attribute).
_COUNTERS = tuple(
    (number << 3, name)
    for number, name in (
        (11, "decode_ns"),
        (12, "user_ns"),
        (13, "encode_ns"),
        (14, "lane_skew_ns"),
        (15, "queue_ns"),
    )
)


def encode_join_response(response: env_pb.JoinResponse) -> bytes:
    """Serialise an env ``JoinResponse``; fast for ``step`` and ``reset``, betterproto2 else."""
    if not response._unknown_fields:
        kind, body = betterproto2.which_one_of(response, "kind")
        try:
            if kind == "step":
                out = bytearray()
                put_len(out, 0x12, _encode_step(body))  # type: ignore[arg-type]
            elif kind == "reset":
                out = bytearray()
                put_len(out, 0x0A, _encode_reset(body))  # type: ignore[arg-type]
            else:
                raise Fallback
            if response.request_id:
                put_len(out, 0x2A, response.request_id.encode())
            if response.endpoint_total_ns is not None:
                out.append(0x30)
                put_varint(out, response.endpoint_total_ns)
            for key, name in _COUNTERS:
                value = getattr(response, name)
                if value:
                    out.append(key)
                    put_varint(out, value)
            return bytes(out)
        except Fallback:
            pass
    return bytes(response)
