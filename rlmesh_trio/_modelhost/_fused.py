"""Fused grouped predicts: several routes' groups, one batched policy call.

Groups whose adapters share a fuse key (one observation spec, one bound
policy) are answered by one ``predict_batch`` call over their rows
concatenated in group order; the actions are split back by row counts.

The rows of a grouped predict from many routes are usually one each (every
route's step): decoding 32 groups one by one and encoding 32 action frames one
by one cost far more than the fused forward pass (issue 23, case 7 of
``benchmarks/compare_rlmesh.py``). So where every leaf of the observation spec
is fixed-stride (Box, Discrete, MultiBinary, MultiDiscrete), the groups' slabs
are joined leaf by leaf and decoded as ONE batch of all rows; and where the
action spec is one fixed-stride leaf shared by every group and the policy
returns an array, the actions are encoded as ONE slab and cut into each
group's bytes. The fixed-stride codec is row-major, so both give exactly the
values and bytes of the per-group path. Anything the joined form does not
accept (a malformed group, a value out of range, an action of the wrong shape
or type) goes through the per-group path, which gives each group its own
error, as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import spaces
from .._errors import ProtocolError
from .._protocol import model_pb, spaces_pb
from ..spaces._codec import compile_spec
from ..spaces._fixed import FixedLeaf
from ._adapter import Adapter, observation_space
from ._faults import ModelFault
from ._phases import ENCODE_ERRORS, Invoke, PhaseTimes, timed_call, timed_decode, timed_encode
from ._tree import concat_rows, split_rows

__all__ = ["decode_joined", "encode_joined", "predict_fused"]

#: One fused group: (its index in the request, its adapter, its rows).
_Member = tuple[int, Adapter, int]


def _observation_of(group: model_pb.PredictRequest) -> spaces_pb.SpaceValue:
    observation = group.observation
    # Not ``or``: a message's truth test walks all its fields.
    return spaces_pb.SpaceValue() if observation is None else observation


def decode_joined(
    spec: spaces_pb.SpaceSpec, observations: list[spaces_pb.SpaceValue], sizes: list[int]
) -> Any | None:
    """The stacked value of every group's rows, in order, decoded as one batch; None
    where the joined form does not apply (a non-fixed leaf, a group whose framing is
    wrong, a value out of range): the caller decodes group by group then.

    Synchronous CPU work, no checkpoint: nothing to cancel.
    """
    codec = compile_spec(spec)
    fixed = codec.fixed
    if not fixed or len(fixed) != codec.n_leaves:
        return None
    joined: list[bytes] = [b""] * codec.n_leaves
    for index, stride, _path in fixed:
        parts = []
        for observation, rows in zip(observations, sizes, strict=True):
            leaves = observation.leaves
            if len(leaves) != codec.n_leaves or len(leaves[index]) != rows * stride:
                return None
            parts.append(leaves[index])
        joined[index] = b"".join(parts)
    try:
        return codec.root.decode_stacked(joined, sum(sizes), True)
    except ProtocolError:
        return None


def encode_joined(
    spec: spaces_pb.SpaceSpec, actions: Any, sizes: list[int]
) -> list[spaces_pb.SpaceValue] | None:
    """One action frame per group, from one encode of all rows' ``actions``; None where
    the joined form does not apply (not one fixed-stride leaf, not an array, an action
    that does not fit): the caller encodes group by group then.

    Synchronous CPU work, no checkpoint: nothing to cancel.
    """
    root = compile_spec(spec).root
    if not isinstance(root, FixedLeaf) or type(actions) is not np.ndarray:
        return None
    out: list[bytes] = []
    try:
        root.encode_stacked(actions, sum(sizes), out)
    except ENCODE_ERRORS:
        return None
    slab = out[0]
    stride = root.stride
    frames = []
    start = 0
    for rows in sizes:
        stop = start + rows * stride
        frames.append(spaces_pb.SpaceValue(leaves=[slab[start:stop]]))
        start = stop
    return frames


async def predict_fused(
    groups: list[model_pb.PredictRequest],
    members: list[tuple[int, Adapter]],
    results: list[model_pb.GroupedPredictResult | None],
    invoke: Invoke,
    times: PhaseTimes,
    fused_invoke: Callable[[int], Invoke] | None = None,
) -> None:
    """Answer ``members`` (indices into ``groups`` and their adapters, sharing one fuse
    key) with one batched call, each result into ``results`` at its group's index.
    The call goes through ``fused_invoke(rows)`` if given, else ``invoke``.

    A group that fails alone (its observation, its action) gets its own error; a
    failing policy call fails every group in it.

    Cancellation: only ``invoke`` can be interrupted; the cancellation propagates.
    """
    # Members share a fuse key, hence one bound policy and one observation spec.
    batch_fn = members[0][1].policy.predict_batch
    assert batch_fn is not None
    kept, fused = _decode_members(groups, members, results, times)
    if not kept:
        return
    if fused_invoke is not None:
        invoke = fused_invoke(sum(rows for _, _, rows in kept))
    try:
        actions = await timed_call(invoke, batch_fn, fused, times)
        frames = _encode_members(kept, actions, times)
    except ModelFault as fault:
        for index, _, _ in kept:
            results[index] = model_pb.GroupedPredictResult(error=fault.to_proto())
        return
    for (index, _, _), frame in zip(kept, frames, strict=True):
        if isinstance(frame, ModelFault):
            results[index] = model_pb.GroupedPredictResult(error=frame.to_proto())
            continue
        response = model_pb.PredictResponse(context=groups[index].context, actions=[frame])
        results[index] = model_pb.GroupedPredictResult(response=response)


def _decode_members(
    groups: list[model_pb.PredictRequest],
    members: list[tuple[int, Adapter]],
    results: list[model_pb.GroupedPredictResult | None],
    times: PhaseTimes,
) -> tuple[list[_Member], Any]:
    """The members whose rows decoded, and all their rows as one stacked value: joined
    when that form applies, else decoded group by group (a bad group gets its error)."""
    sized = [(index, adapter, len(groups[index].episode_info)) for index, adapter in members]
    spec = members[0][1].observation_space
    if spec is not None and len(members) > 1:
        started = time.perf_counter_ns()
        observations = [_observation_of(groups[index]) for index, _ in members]
        joined = decode_joined(spec, observations, [rows for _, _, rows in sized])
        times.decode_ns += time.perf_counter_ns() - started
        if joined is not None:
            return sized, joined
    kept: list[_Member] = []
    parts: list[Any] = []
    for index, adapter, rows in sized:
        try:
            stacked = timed_decode(
                spaces.decode_stacked,
                observation_space(adapter),
                _observation_of(groups[index]),
                rows,
                times,
            )
        except ModelFault as fault:
            results[index] = model_pb.GroupedPredictResult(error=fault.to_proto())
            continue
        kept.append((index, adapter, rows))
        parts.append(stacked)
    if not parts:
        return kept, None
    return kept, parts[0] if len(parts) == 1 else concat_rows(parts)


def _encode_members(
    kept: list[_Member], actions: Any, times: PhaseTimes
) -> list[spaces_pb.SpaceValue | ModelFault]:
    """Each member's action frame (or the fault of its actions alone): one joined
    encode when every member has the same action spec and it applies, else one per
    member.

    Raises:
        ModelFault: the policy returned a number of actions other than the rows'.
    """
    sizes = [rows for _, _, rows in kept]
    first = kept[0][1]
    if all(adapter.action_key == first.action_key for _, adapter, _ in kept):
        started = time.perf_counter_ns()
        frames = encode_joined(first.action_space, actions, sizes)
        times.encode_ns += time.perf_counter_ns() - started
        if frames is not None:
            return list(frames)
    try:
        pieces = split_rows(actions, sizes)
    except (ValueError, TypeError) as exc:
        raise ModelFault.internal(f"internal error: {type(exc).__name__}: {exc}") from None
    out: list[spaces_pb.SpaceValue | ModelFault] = []
    for (_, adapter, rows), piece in zip(kept, pieces, strict=True):
        try:
            out.append(
                timed_encode(spaces.encode_stacked, adapter.action_space, times, piece, rows)
            )
        except ModelFault as fault:
            out.append(fault)
    return out
