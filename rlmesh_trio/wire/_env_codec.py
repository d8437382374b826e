"""Hand-rolled protobuf for the env server's hot path: Step/Reset in, Step/Reset out.

A served route sends one Step (and a Reset per episode) per step, and
betterproto2 spends 60-80 µs decoding the request and encoding the reply
(mostly a reflective walk over every field with a ``warnings`` context per
default value). This module decodes a ``JoinRequest`` carrying ``step`` or
``reset`` and encodes a ``JoinResponse`` carrying ``step`` or ``reset``
directly, producing the same message objects and the same bytes
betterproto2 would. Every other shape -- another ``oneof`` arm, unknown
fields, a repeated singular field, an unexpected wire type, an out-of-range
``uint32`` -- falls back to betterproto2. ``tests/wire/test_env_server_fastwire.py``
checks both directions against betterproto2 over generated messages.
"""

from __future__ import annotations

import struct
from typing import Any

import betterproto2

from .._wire import env_pb, spaces_pb
from ._pb import (
    LEN,
    VARINT,
    Fallback,
    blob,
    decode_space_value,
    fields,
    integer,
    key,
    number,
    packed_varints,
    put_len,
    put_packed,
    put_space_value,
    put_varint,
    signed64,
    text,
)

__all__ = ["decode_join_request", "encode_join_response"]

_U32 = (1 << 32) - 1

_S = env_pb.StepRequest
_S_ACTION, _S_TIMEOUT, _S_INDICES, _S_EPISODES = (
    number(_S, name) for name in ("action", "timeout_ms", "env_indices", "episode_ids")
)
_R = env_pb.ResetRequest
_R_SEEDS, _R_OPTIONS, _R_TIMEOUT, _R_INDICES, _R_EPISODES = (
    number(_R, name) for name in ("seeds", "options", "timeout_ms", "env_indices", "episode_ids")
)
_J = env_pb.JoinRequest
_J_RID, _J_STEP, _J_RESET = (number(_J, name) for name in ("request_id", "step", "reset"))
_SR = env_pb.StepResponse
_K_SR = {
    name: key(_SR, name)
    for name in (
        "observation",
        "rewards",
        "terminated_mask",
        "truncated_mask",
        "infos",
        "completed_episodes",
        "env_indices",
    )
}
_K_RR_OBS = key(env_pb.ResetResponse, "observation")
_K_RR_INFOS = key(env_pb.ResetResponse, "infos")
_JR = env_pb.JoinResponse
_K_JR_STEP = key(_JR, "step")
_K_JR_RESET = key(_JR, "reset")
_K_JR_RID = key(_JR, "request_id")
_K_JR_TOTAL = key(_JR, "endpoint_total_ns", VARINT)

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
    for field, wire, value in fields(data):
        if field == _S_ACTION and wire == LEN and action is None:
            action = decode_space_value(blob(value))
        elif field == _S_TIMEOUT and wire == VARINT and not seen & 4:
            seen |= 4
            timeout_ms = integer(value)
        elif field == _S_INDICES:
            _indices(wire, value, env_indices)
        elif field == _S_EPISODES and wire == LEN:
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
    for field, wire, value in fields(data):
        if field == _R_SEEDS:
            raw = packed_varints(value) if isinstance(value, bytes) else [value]
            seeds.extend(signed64(seed) for seed in raw)
        elif field == _R_OPTIONS and wire == LEN and options is None:
            options = _meta_map(blob(value))
        elif field == _R_TIMEOUT and wire == VARINT and not seen & 8:
            seen |= 8
            timeout_ms = integer(value)
        elif field == _R_INDICES:
            _indices(wire, value, env_indices)
        elif field == _R_EPISODES and wire == LEN:
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
        for field, wire, value in fields(data):
            if wire != LEN:
                raise Fallback
            if field == _J_RID and request_id is None:
                request_id = text(value)
            elif field == _J_STEP and arm is None:
                arm = ("step", _step(blob(value)))
            elif field == _J_RESET and arm is None:
                arm = ("reset", _reset(blob(value)))
            else:
                raise Fallback
        if arm is not None:
            return env_pb.JoinRequest(request_id=request_id or "", **{arm[0]: arm[1]})
    except (Fallback, struct.error):
        pass
    return env_pb.JoinRequest.parse(data)


# ---------------------------------------------------------------------- encoding


def _put_message(out: bytearray, tag: bytes, message: Any) -> None:
    """A sub-message through betterproto2 (the rare, structured ones: infos, episodes)."""
    put_len(out, tag, bytes(message))


def _put_infos(out: bytearray, tag: bytes, infos: spaces_pb.MetaMap) -> None:
    if not infos.entries:
        out += tag
        out.append(0)
    else:
        _put_message(out, tag, infos)


def _encode_step(step: env_pb.StepResponse) -> bytearray:
    out = bytearray()
    if step.observation is not None:
        put_space_value(out, _K_SR["observation"], step.observation)
    if step.rewards:
        put_len(out, _K_SR["rewards"], struct.pack(f"<{len(step.rewards)}d", *step.rewards))
    if step.terminated_mask:
        put_len(out, _K_SR["terminated_mask"], step.terminated_mask)
    if step.truncated_mask:
        put_len(out, _K_SR["truncated_mask"], step.truncated_mask)
    if step.infos is not None:
        _put_infos(out, _K_SR["infos"], step.infos)
    for episode in step.completed_episodes:
        _put_message(out, _K_SR["completed_episodes"], episode)
    if step.env_indices:
        put_packed(out, _K_SR["env_indices"], step.env_indices)
    return out


def _encode_reset(reset: env_pb.ResetResponse) -> bytearray:
    out = bytearray()
    if reset.observation is not None:
        put_space_value(out, _K_RR_OBS, reset.observation)
    if reset.infos is not None:
        _put_infos(out, _K_RR_INFOS, reset.infos)
    return out


#: The additive uint64 counters (0.1.0 fields 11-15) as (encoded key, attribute).
_COUNTERS = tuple(
    (key(_JR, name, VARINT), name)
    for name in ("decode_ns", "user_ns", "encode_ns", "lane_skew_ns", "queue_ns")
)


def encode_join_response(response: env_pb.JoinResponse) -> bytes:
    """Serialise an env ``JoinResponse``; fast for ``step`` and ``reset``, betterproto2 else."""
    kind, body = betterproto2.which_one_of(response, "kind")
    try:
        if kind == "step":
            out = bytearray()
            put_len(out, _K_JR_STEP, _encode_step(body))  # type: ignore[arg-type]
        elif kind == "reset":
            out = bytearray()
            put_len(out, _K_JR_RESET, _encode_reset(body))  # type: ignore[arg-type]
        else:
            raise Fallback
        if response.request_id:
            put_len(out, _K_JR_RID, response.request_id.encode())
        if response.endpoint_total_ns is not None:
            out += _K_JR_TOTAL
            put_varint(out, response.endpoint_total_ns)
        for tag, name in _COUNTERS:
            value = getattr(response, name)
            if value:
                out += tag
                put_varint(out, value)
        return bytes(out)
    except Fallback:
        return bytes(response)
