"""Hand-rolled protobuf for the env server's hot path: Step/Reset in, Step/Reset out.

betterproto2 spends 60-80 µs per served step decoding the request and encoding
the reply. Every other shape, and an index beyond ``uint32``, falls back to it
(``tests/wire/test_env_server_fastwire.py`` checks both ways).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from .._protocol import env_pb, spaces_pb
from . import _skim
from ._pb import (
    DECODE_ERRORS,
    ENV_COUNTERS,
    LEN,
    VARINT,
    Fallback,
    JoinCodec,
    blob,
    decode_space_value,
    fields,
    integer,
    join_arm,
    key,
    number,
    packed_varints,
    put_len,
    put_packed,
    put_space_value,
    read_varint,
    signed64,
    span,
    text,
)
from ._tail import put_timing_tail

__all__ = [
    "decode_join_arm",
    "decode_join_request",
    "decode_step_arm",
    "encode_join_parts",
    "encode_join_response",
    "encode_step_reply",
]

_U32 = (1 << 32) - 1

# ---------------------------------------------------------------------- decoding


def _numbers(message: type, *names: str) -> dict[int, str]:
    return {number(message, name): name for name in names}


_COMMON = ("timeout_ms", "env_indices", "episode_ids")
_STEP_FIELDS = _numbers(env_pb.StepRequest, "action", *_COMMON)
_RESET_FIELDS = _numbers(env_pb.ResetRequest, "seeds", "options", *_COMMON)


def _varints(value: int | bytes) -> list[int] | tuple[int]:
    """A ``repeated`` varint field's values: packed or one value per field."""
    return packed_varints(value) if isinstance(value, bytes) else (value,)


def _request_fields(data: bytes, names: dict[int, str]) -> dict[str, Any]:
    """The fields of a Step or Reset request, as the keyword arguments of its class.

    Raises:
        Fallback: an unknown field, a singular field twice or of the wrong wire
            type, an index beyond ``uint32`` (truncation is betterproto2's business).
    """
    indices: list[int] = []
    episode_ids: list[str] = []
    out: dict[str, Any] = {"env_indices": indices, "episode_ids": episode_ids}
    for field, wire, value in fields(data):
        name = names.get(field)
        if name == "env_indices":
            for index in _varints(value):
                if index > _U32:
                    raise Fallback
                indices.append(index)
        elif name == "episode_ids" and wire == LEN:
            episode_ids.append(text(value))
        elif name == "seeds":
            out.setdefault(name, []).extend([signed64(seed) for seed in _varints(value)])
        elif name is None or name in out:
            raise Fallback
        elif name == "action":
            out[name] = decode_space_value(blob(value))
        elif name == "timeout_ms":
            out[name] = integer(value)
        else:  # options: usually absent or empty; only a non-empty map needs the parser
            options = blob(value)
            out[name] = _skim.parse(spaces_pb.MetaMap, options) if options else spaces_pb.MetaMap()
    return out


def _step(data: bytes) -> env_pb.StepRequest:
    return env_pb.StepRequest(**_request_fields(data, _STEP_FIELDS))


def _reset(data: bytes) -> env_pb.ResetRequest:
    return env_pb.ResetRequest(**_request_fields(data, _RESET_FIELDS))


_T_STEP = key(env_pb.JoinRequest, "step")[0]
_T_REQUEST_ID = key(env_pb.JoinRequest, "request_id")[0]
_T_ACTION = key(env_pb.StepRequest, "action")[0]
_T_TIMEOUT = key(env_pb.StepRequest, "timeout_ms", VARINT)[0]
_T_INDICES = key(env_pb.StepRequest, "env_indices")[0]  # packed
_T_EPISODE = key(env_pb.StepRequest, "episode_ids")[0]


def decode_step_arm(data: bytes) -> tuple[str, env_pb.StepRequest] | None:
    """A ``JoinRequest`` holding a step, as ``(request_id, step)``: the parts
    :func:`decode_join_arm` gives, read in one pass over the bytes; ``None`` for
    anything else (that function reads it, or betterproto2)."""
    try:
        return _step_arm(data)
    except DECODE_ERRORS:
        return None


def _step_arm(data: bytes) -> tuple[str, env_pb.StepRequest] | None:
    arm = join_arm(data, _T_STEP, _T_REQUEST_ID)
    if arm is None:
        return None
    request_id, pos, end = arm
    indices: list[int] = []
    episode_ids: list[str] = []
    out: dict[str, Any] = {"env_indices": indices, "episode_ids": episode_ids}
    while pos < end:
        tag = data[pos]
        if tag == _T_TIMEOUT and "timeout_ms" not in out:
            out["timeout_ms"], pos = read_varint(data, pos + 1)
            continue
        start, pos = span(data, pos + 1, end)
        if tag == _T_ACTION and "action" not in out:
            out["action"] = decode_space_value(data[start:pos])
        elif tag == _T_EPISODE:
            episode_ids.append(data[start:pos].decode())
        elif tag == _T_INDICES:
            for index in packed_varints(data[start:pos]):
                if index > _U32:
                    return None
                indices.append(index)
        else:
            return None
    if pos != end:
        return None
    return request_id or "", env_pb.StepRequest(**out)


# ---------------------------------------------------------------------- encoding


def _keys(message: type) -> dict[str, bytes]:
    """Every field's length-delimited key (the ones encoded here are all LEN)."""
    return {item.name: key(message, item.name) for item in dataclasses.fields(message)}  # type: ignore[arg-type]


_SR = _keys(env_pb.StepResponse)
_RR = _keys(env_pb.ResetResponse)


def _put_infos(out: bytearray, tag: bytes, infos: spaces_pb.MetaMap | None) -> None:
    if infos is not None:
        # An empty map is two bytes; only entries need betterproto2.
        put_len(out, tag, bytes(infos) if infos.entries else b"")


def _encode_step(step: env_pb.StepResponse) -> bytearray:
    out = bytearray()
    if step.observation is not None:
        put_space_value(out, _SR["observation"], step.observation)
    if step.rewards:
        put_len(out, _SR["rewards"], struct.pack(f"<{len(step.rewards)}d", *step.rewards))
    if step.terminated_mask:
        put_len(out, _SR["terminated_mask"], step.terminated_mask)
    if step.truncated_mask:
        put_len(out, _SR["truncated_mask"], step.truncated_mask)
    _put_infos(out, _SR["infos"], step.infos)
    for episode in step.completed_episodes:  # rare and structured: betterproto2
        put_len(out, _SR["completed_episodes"], bytes(episode))
    if step.env_indices:
        put_packed(out, _SR["env_indices"], step.env_indices)
    return out


def _encode_reset(reset: env_pb.ResetResponse) -> bytearray:
    out = bytearray()
    if reset.observation is not None:
        put_space_value(out, _RR["observation"], reset.observation)
    _put_infos(out, _RR["infos"], reset.infos)
    return out


_CODEC = JoinCodec(
    env_pb.JoinRequest,
    {"step": _step, "reset": _reset},
    env_pb.JoinResponse,
    {"step": _encode_step, "reset": _encode_reset},
    ENV_COUNTERS,
)
decode_join_request = _CODEC.decode
#: ``decode_join_request`` as ``(request_id, kind, body)``, or ``None`` where it would
#: fall back to betterproto2.
decode_join_arm = _CODEC.decode_arm
encode_join_response = _CODEC.encode
#: ``encode_join_response`` from the parts (arm, body, request_id, endpoint_total_ns,
#: the ENV_COUNTERS values) without building the JoinResponse.
encode_join_parts = _CODEC.encode_parts


_K_STEP = key(env_pb.JoinResponse, "step")
_K_REQUEST_ID = key(env_pb.JoinResponse, "request_id")
_K_TOTAL_NS = key(env_pb.JoinResponse, "endpoint_total_ns", VARINT)
_K_COUNTERS = tuple(key(env_pb.JoinResponse, name, VARINT) for name in ENV_COUNTERS)
_LEAF = key(spaces_pb.SpaceValue, "leaves")
_ONE_REWARD = struct.Struct("<d")
# A one-env step's fixed fields: its reward's key and size, each mask's key and size.
_K_REWARD = _SR["rewards"] + bytes((_ONE_REWARD.size,))
_K_TERMINATED = _SR["terminated_mask"] + b"\x01"
_K_TRUNCATED = _SR["truncated_mask"] + b"\x01"
_EMPTY_INFOS = _SR["infos"] + b"\x00"
#: The largest observation leaf whose step body still has a one-byte size (22 bytes
#: of keys, sizes, reward and masks around it).
_MAX_LEAF = 0x7F - 22


def encode_step_reply(
    step: env_pb.StepResponse, request_id: str, endpoint_total_ns: int, counters: tuple[int, ...]
) -> bytes:
    """``encode_join_parts("step", step, request_id, endpoint_total_ns, counters)``, the
    one-env step (one observation leaf, one reward, one-byte masks, no infos) written
    in one go: every served step of a one-env endpoint."""
    observation = step.observation
    rewards = step.rewards
    leaves = observation.leaves if observation is not None else ()
    infos = step.infos
    if (
        len(leaves) != 1
        or len(leaves[0]) > _MAX_LEAF
        or len(rewards) != 1
        or len(step.terminated_mask) != 1
        or len(step.truncated_mask) != 1
        or (infos is not None and infos.entries)
        or step.completed_episodes
        or step.env_indices
    ):
        return encode_join_parts("step", step, request_id, endpoint_total_ns, counters)
    leaf = leaves[0]
    body = bytearray(_SR["observation"])
    body += bytes((len(leaf) + 2,)) + _LEAF + bytes((len(leaf),))
    body += leaf
    body += _K_REWARD
    body += _ONE_REWARD.pack(rewards[0])
    body += _K_TERMINATED
    body += step.terminated_mask
    body += _K_TRUNCATED
    body += step.truncated_mask
    if infos is not None:
        body += _EMPTY_INFOS
    out = bytearray(_K_STEP)
    out.append(len(body))  # under 0x80: the leaf's bound above keeps it so
    out += body
    if request_id:
        put_len(out, _K_REQUEST_ID, request_id.encode())
    put_timing_tail(out, _K_TOTAL_NS, endpoint_total_ns, _K_COUNTERS, counters)
    return bytes(out)
