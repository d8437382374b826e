"""A one-lane env step's reply written from its parts, with no ``StepResponse`` built.

The env host answers the served one-env step with a :class:`StepParts` (the
observation's leaves, reward, done flags, infos, completed episodes) and
:func:`encode_step_parts` writes the ``JoinResponse`` bytes betterproto2 would
write for the response built from them (``tests/wire/test_step_parts.py``).
"""

from __future__ import annotations

import struct

from .._protocol import env_pb, spaces_pb
from ._pb import ENV_COUNTERS, VARINT, key, put_len

__all__ = ["StepParts", "encode_step_parts", "step_response"]


class StepParts:
    """One lane's step answer in parts: what ``StepResponse`` would hold, unbuilt.

    ``infos`` is None for empty infos (the usual step: no ``MetaMap`` built);
    ``subset`` says the request named lane 0 (``env_indices=[0]`` in the reply).
    """

    __slots__ = ("completed", "infos", "leaves", "reward", "subset", "terminated", "truncated")

    def __init__(
        self,
        leaves: list[bytes],
        reward: float,
        terminated: bool,
        truncated: bool,
        infos: spaces_pb.MetaMap | None,
        completed: list[env_pb.EpisodeMetadata],
        subset: bool,
    ) -> None:
        self.leaves = leaves
        self.reward = reward
        self.terminated = terminated
        self.truncated = truncated
        self.infos = infos
        self.completed = completed
        self.subset = subset

    @property
    def rewards(self) -> list[float]:
        """The rewards as a ``StepResponse`` holds them (one lane: one reward)."""
        return [self.reward]

    @property
    def completed_episodes(self) -> list[env_pb.EpisodeMetadata]:
        """The episodes this step completed, as ``StepResponse.completed_episodes``."""
        return self.completed


def step_response(parts: StepParts) -> env_pb.StepResponse:
    """The ``StepResponse`` the parts stand for (for callers that need the message)."""
    return env_pb.StepResponse(
        observation=spaces_pb.SpaceValue(leaves=list(parts.leaves)),
        rewards=[parts.reward],
        terminated_mask=_DONE[parts.terminated],
        truncated_mask=_DONE[parts.truncated],
        infos=parts.infos if parts.infos is not None else spaces_pb.MetaMap(),
        completed_episodes=list(parts.completed),
        env_indices=[0] if parts.subset else [],
    )


def _step_key(name: str) -> bytes:
    return key(env_pb.StepResponse, name)


_DONE = (b"\x00", b"\x01")
_K_OBSERVATION = _step_key("observation")
_LEAF = key(spaces_pb.SpaceValue, "leaves")
_REWARD = struct.Struct("<d")
# The fixed run after the observation: reward key and size; each mask's key, size, value.
_K_REWARD = _step_key("rewards") + bytes((_REWARD.size,))
_MASKS = {
    (terminated, truncated): _step_key("terminated_mask")
    + b"\x01"
    + _DONE[terminated]
    + _step_key("truncated_mask")
    + b"\x01"
    + _DONE[truncated]
    for terminated in (False, True)
    for truncated in (False, True)
}
_K_INFOS = _step_key("infos")
_EMPTY_INFOS = _K_INFOS + b"\x00"
_K_COMPLETED = _step_key("completed_episodes")
_LANE_ZERO = _step_key("env_indices") + b"\x01\x00"  # packed [0]
_K_STEP = key(env_pb.JoinResponse, "step")
_K_REQUEST_ID = key(env_pb.JoinResponse, "request_id")
#: The varint fields after the step, in order: endpoint_total_ns, then ENV_COUNTERS.
_K_TAIL = tuple(
    key(env_pb.JoinResponse, name, VARINT) for name in ("endpoint_total_ns", *ENV_COUNTERS)
)
_U64 = (1 << 64) - 1


def encode_step_parts(
    parts: StepParts, request_id: str, endpoint_total_ns: int, counters: tuple[int, ...]
) -> bytes:
    """``bytes(JoinResponse(step=step_response(parts), request_id=..., endpoint_total_ns=...,
    <ENV_COUNTERS>=counters))``, written from the parts."""
    leaves = parts.leaves
    if len(leaves) == 1 and len(leaves[0]) < 0x7E:
        # The usual observation: one leaf, both sizes one byte.
        leaf = leaves[0]
        body = bytearray(_K_OBSERVATION)
        body += bytes((len(leaf) + 2, _LEAF[0], len(leaf)))
        body += leaf
    else:
        observation = bytearray()
        for leaf in leaves:
            put_len(observation, _LEAF, leaf)
        body = bytearray()
        put_len(body, _K_OBSERVATION, observation)
    body += _K_REWARD
    body += _REWARD.pack(parts.reward)
    body += _MASKS[parts.terminated, parts.truncated]
    infos = parts.infos
    if infos is None or not infos.entries:
        body += _EMPTY_INFOS
    else:
        put_len(body, _K_INFOS, bytes(infos))
    for episode in parts.completed:  # rare and structured: betterproto2
        put_len(body, _K_COMPLETED, bytes(episode))
    if parts.subset:
        body += _LANE_ZERO
    out = bytearray()
    put_len(out, _K_STEP, body)
    if request_id:
        put_len(out, _K_REQUEST_ID, request_id.encode())
    # endpoint_total_ns always (it is optional: set is written), each counter unless 0.
    index = 0
    for value in (endpoint_total_ns, *counters):
        if value or not index:
            out += _K_TAIL[index]
            value &= _U64
            while value >= 0x80:  # varints inline: five of them per reply
                out.append((value & 0x7F) | 0x80)
                value >>= 7
            out.append(value)
        index += 1
    return bytes(out)
