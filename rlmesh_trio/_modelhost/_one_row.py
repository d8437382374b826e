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

import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._errors import ProtocolError
from .._protocol import model_pb, spaces_pb
from ..runtime._placement import settle_inline
from ..spaces._codec import compile_spec, decode_batch
from ..spaces._fixed import BoxLeaf, DiscreteLeaf
from ..spaces._node import Node
from ..spaces._values import struct_for
from ._faults import ModelFault
from ._invoke import PlacedInvoker
from ._phases import ENCODE_ERRORS, Invoke, PhaseTimes, decode_fault, encode_fault
from ._policy import PolicyFn

__all__ = ["RowPlan", "decode_row", "encode_row", "plan_rows", "predict_row"]


class RowPlan:
    """The codec calls of one adapter's one-row predicts (see module doc).

    Every method is synchronous CPU work with no checkpoint: nothing to cancel.
    """

    __slots__ = (
        "_action_box",
        "_action_root",
        "_box_native",
        "_box_shape",
        "_box_stride",
        "_box_wire",
        "_obs_spec",
        "_observation_leaves",
        "_observation_root",
        "_pack_action",
    )

    def __init__(self, observation_spec: spaces_pb.SpaceSpec, action_spec: spaces_pb.SpaceSpec):
        observed = compile_spec(observation_spec)
        self._obs_spec = observation_spec
        self._observation_root: Node = observed.root
        self._observation_leaves = observed.n_leaves
        root = observed.root
        # A numeric Box observation of at least one axis decodes straight from its slab
        # (a bool Box reads bytes, a scalar Box becomes a numpy scalar: general decoder).
        # ``_box_stride`` -1 means: not such a Box.
        self._box_stride = -1
        self._box_wire = self._box_native = np.dtype(np.float64)
        self._box_shape: tuple[int, ...] | None = None
        if isinstance(root, BoxLeaf) and root.wire.kind != "b" and root.shape:
            self._box_stride = root.stride
            self._box_wire = root.wire
            self._box_native = root.native
            # ``frombuffer`` already has the one axis of a flat Box.
            self._box_shape = root.shape if len(root.shape) > 1 else None
        action_root = compile_spec(action_spec).root
        self._action_root: Node = action_root
        # A Discrete action packs with one prebuilt struct, as the leaf itself would.
        self._pack_action: Callable[[Any], bytes] | None = None
        if isinstance(action_root, DiscreteLeaf):
            self._pack_action = struct_for(action_root.wire, 1).pack
        # (dtype, shape) of a Box action: an array of exactly these is its own wire bytes.
        self._action_box: tuple[np.dtype, tuple[int, ...]] | None = None
        if isinstance(action_root, BoxLeaf):
            self._action_box = (action_root.wire, action_root.shape)

    def decode(self, observation: spaces_pb.SpaceValue) -> Any:
        """The one row's observation, as ``spaces.decode_batch(spec, observation, 1)[0]``.

        Raises:
            ProtocolError: the observation does not fit the spec (the general message).
        """
        if isinstance(observation, spaces_pb.SpaceValue):
            return self.decode_leaves(observation.leaves)
        # Off the planned path: the general decoder says exactly what is wrong.
        return decode_batch(self._obs_spec, observation, 1)[0]

    def decode_leaves(self, leaves: list[bytes]) -> Any:
        """:meth:`decode` of a frame given as its leaves (an in-process env's, unwrapped).

        Raises:
            ProtocolError: the leaves do not fit the spec (the general message).
        """
        if len(leaves) == self._observation_leaves:
            if self._box_stride < 0:
                return self._observation_root.decode_lanes(leaves, 1, True)[0]
            raw = leaves[0]
            if len(raw) == self._box_stride:
                # A fresh, writable copy in the native byte order, as the general decoder gives.
                flat = np.frombuffer(raw, dtype=self._box_wire).astype(self._box_native)
                shape = self._box_shape
                return flat if shape is None else flat.reshape(shape)
        # Off the planned path: the general decoder says exactly what is wrong.
        return decode_batch(self._obs_spec, spaces_pb.SpaceValue(leaves=list(leaves)), 1)[0]

    def encode(self, action: Any) -> spaces_pb.SpaceValue:
        """One action as a one-row frame, as ``spaces.encode_batch(spec, [action])``.

        Raises:
            ProtocolError, TypeError, ValueError, OverflowError: the action does not fit
            the action space (what the general encoder raises).
        """
        return spaces_pb.SpaceValue(leaves=self.encode_leaves(action))

    def encode_leaves(self, action: Any) -> list[bytes]:
        """:meth:`encode`'s frame as its leaves (for an in-process env, unwrapped).

        Raises:
            ProtocolError, TypeError, ValueError, OverflowError: as :meth:`encode`.
        """
        pack = self._pack_action
        if pack is not None:
            try:
                return [pack(action)]
            except (struct.error, TypeError):
                pass  # floats, out-of-range values, arrays: the leaf's checked path says why
        box = self._action_box
        if box is not None and type(action) is np.ndarray:
            dtype, shape = box
            if action.dtype == dtype and action.shape == shape:
                # What the leaf does with one such lane: no cast, C-order bytes.
                return [action.tobytes()]
        out: list[bytes] = []
        self._action_root.encode_lanes([action], 1, out)
        return out


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


def decode_row(plan: RowPlan, leaves: list[bytes]) -> Any:
    """:meth:`RowPlan.decode_leaves`, its refusal the fault :func:`predict_row` raises.

    Raises:
        ModelFault: the observation does not fit its space.
    """
    try:
        return plan.decode_leaves(leaves)
    except ProtocolError as exc:
        raise decode_fault(exc) from None


def encode_row(plan: RowPlan, action: Any) -> list[bytes]:
    """:meth:`RowPlan.encode_leaves`, its refusal the fault :func:`predict_row` raises.

    Raises:
        ModelFault: the action does not fit its space.
    """
    try:
        return plan.encode_leaves(action)
    except ENCODE_ERRORS as exc:
        raise encode_fault(exc) from None


async def predict_row(
    plan: RowPlan,
    predict: PolicyFn,
    invoke: Invoke,
    request: model_pb.PredictRequest,
    times: PhaseTimes | None,
) -> model_pb.PredictResponse:
    """Decode the request's one row, call ``predict`` on it through ``invoke``, encode
    its action frame.

    With ``times`` the three phases are timed into it, as the general path does;
    without, no clock is read.

    Cancellation: only ``invoke`` can be interrupted; the cancellation propagates.

    Raises:
        ModelFault: the observation or the action does not fit its space, or the
            policy raised (0.1.0's messages, as on the general path).
    """
    observation = request.observation
    if observation is None:  # not ``or``: a message's truth test walks all its fields
        observation = spaces_pb.SpaceValue()
    if times is not None:
        frame = await _timed_row(plan, invoke, predict, observation, times)
    else:
        try:
            value = plan.decode(observation)
        except ProtocolError as exc:
            raise decode_fault(exc) from None
        try:
            # An inline policy call without the invoke's coroutine (the in-process step).
            ran = invoke.call_now(predict, value) if type(invoke) is PlacedInvoker else None
            if ran is None:
                action = await invoke(predict, value)
            else:
                action, turn = ran
                if turn:
                    await settle_inline(yield_now=True)
        except Exception as exc:  # the user's policy failed: a ModelError naming the exception
            raise ModelFault.from_exception(exc) from exc
        try:
            frame = plan.encode(action)
        except ENCODE_ERRORS as exc:
            raise encode_fault(exc) from None
    # The context goes back untouched: 0.1.0 and our driver compare it field by field.
    return model_pb.PredictResponse(context=request.context, actions=[frame])


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
