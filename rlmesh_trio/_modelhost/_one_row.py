"""One-row predicts (the common in-process case), with their codec work planned once.

A route's predict carries one observation row and wants one action frame back.
The general path pays, per call, for what one resolved adapter could decide
once: the codec lookup by spec identity, the argument checks of the public
``spaces`` calls, list building, and six clock reads that nobody reads when
the caller passes no :class:`~._phases.PhaseTimes`. A :class:`RowPlan` is
built at ResolveAdapter from the adapter's two specs and keeps their compiled
root nodes, so a predict calls them directly.

A plain numeric Box observation (the CartPole case) is decoded with one
``frombuffer`` and one copy, exactly the values, dtype and shape the general
decoder produces. Anything the plan does not expect (a wrong leaf count, a
short slab) goes through the general decoder, which raises the same
``ProtocolError`` it always did; so answers and messages are the same byte
for byte on either path.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .._errors import ProtocolError
from .._wire import spaces_pb
from ..spaces._codec import compile_spec, decode_batch
from ..spaces._fixed import BoxLeaf
from ..spaces._node import Node
from ._faults import ModelFault
from ._phases import ENCODE_ERRORS, Invoke, PhaseTimes, decode_fault, encode_fault
from ._policy import PolicyFn

__all__ = ["RowPlan", "plan_rows", "predict_row"]


class RowPlan:
    """The codec calls of one adapter's one-row predicts (see module doc).

    Every method is synchronous CPU work with no checkpoint: nothing to cancel.
    """

    __slots__ = ("_action_root", "_box", "_obs_spec", "_observation_leaves", "_observation_root")

    def __init__(self, observation_spec: spaces_pb.SpaceSpec, action_spec: spaces_pb.SpaceSpec):
        observed = compile_spec(observation_spec)
        self._obs_spec = observation_spec
        self._observation_root: Node = observed.root
        self._observation_leaves = observed.n_leaves
        self._action_root: Node = compile_spec(action_spec).root
        root = observed.root
        # (wire dtype, native dtype, stride, shape) of a numeric Box observation; bool Boxes
        # decode any non-zero byte as True, which the general decoder already does well.
        self._box: tuple[np.dtype, np.dtype, int, tuple[int, ...]] | None = None
        # A scalar Box (shape ()) decodes to a numpy scalar, not an array: general path.
        if isinstance(root, BoxLeaf) and root.wire.kind != "b" and root.shape:
            self._box = (root.wire, root.native, root.stride, root.shape)

    def decode(self, observation: spaces_pb.SpaceValue) -> Any:
        """The one row's observation, as ``spaces.decode_batch(spec, observation, 1)[0]``.

        Raises:
            ProtocolError: the observation does not fit the spec (the general message).
        """
        if (
            isinstance(observation, spaces_pb.SpaceValue)
            and len(leaves := observation.leaves) == self._observation_leaves
        ):
            box = self._box
            if box is None:
                return self._observation_root.decode_lanes(leaves, 1, True)[0]
            raw = leaves[0]
            wire, native, stride, shape = box
            if len(raw) == stride:
                return np.frombuffer(raw, dtype=wire).reshape(shape).astype(native)
        # Off the planned path: the general decoder says exactly what is wrong.
        return decode_batch(self._obs_spec, observation, 1)[0]

    def encode(self, action: Any) -> spaces_pb.SpaceValue:
        """One action as a one-row frame, as ``spaces.encode_batch(spec, [action])``.

        Raises:
            ProtocolError, TypeError, ValueError, OverflowError: the action does not fit
            the action space (what the general encoder raises).
        """
        out: list[bytes] = []
        self._action_root.encode_lanes([action], 1, out)
        return spaces_pb.SpaceValue(leaves=out)


def plan_rows(
    observation_spec: spaces_pb.SpaceSpec | None, action_spec: spaces_pb.SpaceSpec
) -> RowPlan | None:
    """A plan for an adapter's specs, or None where the general path must answer.

    None without an observation space (the general path refuses the predict
    with 0.1.0's message) or for a spec the codec cannot compile.
    """
    if observation_spec is None:
        return None
    try:
        return RowPlan(observation_spec, action_spec)
    except ProtocolError:
        return None


async def predict_row(
    plan: RowPlan,
    invoke: Invoke,
    predict: PolicyFn,
    observation: spaces_pb.SpaceValue,
    times: PhaseTimes | None,
) -> spaces_pb.SpaceValue:
    """Decode one row, call ``predict`` on it through ``invoke``, encode its action frame.

    With ``times`` the three phases are timed into it, as the general path does;
    without, no clock is read.

    Cancellation: only ``invoke`` can be interrupted; the cancellation propagates.

    Raises:
        ModelFault: the observation or the action does not fit its space, or the
            policy raised (0.1.0's messages, as on the general path).
    """
    if times is not None:
        return await _timed_row(plan, invoke, predict, observation, times)
    try:
        value = plan.decode(observation)
    except ProtocolError as exc:
        raise decode_fault(exc) from None
    try:
        action = await invoke(predict, value)
    except Exception as exc:  # the user's policy failed: a ModelError naming the exception
        raise ModelFault.from_exception(exc) from exc
    try:
        return plan.encode(action)
    except ENCODE_ERRORS as exc:
        raise encode_fault(exc) from None


async def _timed_row(
    plan: RowPlan,
    invoke: Invoke,
    predict: PolicyFn,
    observation: spaces_pb.SpaceValue,
    times: PhaseTimes,
) -> spaces_pb.SpaceValue:
    clock = time.perf_counter_ns
    started = clock()
    try:
        value = plan.decode(observation)
    except ProtocolError as exc:
        raise decode_fault(exc) from None
    finally:
        called = clock()
        times.decode_ns += called - started
    try:
        action = await invoke(predict, value)
    except Exception as exc:  # the user's policy failed: a ModelError naming the exception
        raise ModelFault.from_exception(exc) from exc
    finally:
        returned = clock()
        times.user_ns += returned - called
    try:
        return plan.encode(action)
    except ENCODE_ERRORS as exc:
        raise encode_fault(exc) from None
    finally:
        times.encode_ns += clock() - returned
