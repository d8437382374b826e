"""Block predicts: one batched policy call over an array of observation rows.

The lane-block path (``rlmesh_trio._blocks``) hands the model a numpy array
of observation rows and wants an array of actions back, with no frames in
between. :func:`rows_plan` decides, per adapter, whether that is possible:
an array observation space (Box, Discrete), a Discrete or Box action space,
a ``predict_batch`` and single actions (no chunks). :func:`predict_rows`
calls ``predict_batch`` once and coerces its output as the message path's
encoder would: an output of the expected shape and kind is taken as is (cast
to the space's dtype); anything else goes through the codec itself, so an
output that does not fit fails with the message path's fault.
"""

from __future__ import annotations

from typing import Any

import attrs
import gymnasium as gym
import numpy as np

from .. import spaces
from .._protocol import spaces_pb
from ._adapter import Adapter
from ._faults import ModelFault
from ._phases import ENCODE_ERRORS, Invoke, encode_fault
from ._policy import PolicyFn

__all__ = ["RowsPlan", "predict_rows", "rows_plan"]


@attrs.frozen(slots=True)
class RowsPlan:
    """How one adapter answers block predicts."""

    predict_batch: PolicyFn
    action_spec: spaces_pb.SpaceSpec
    action_shape: tuple[int, ...]
    action_dtype: np.dtype[Any]
    #: The output kinds taken without the codec ("iu" for Discrete, "f" for Box).
    kinds: str


def rows_plan(adapter: Adapter | None, chunked: bool) -> RowsPlan | None:
    """The block-predict plan of ``adapter``, or None when it has none (see the module doc)."""
    if adapter is None or chunked or adapter.observation_space is None:
        return None
    batch = adapter.policy.predict_batch
    if batch is None:
        return None
    obs_space = spaces.to_gymnasium(adapter.observation_space)
    if not isinstance(obs_space, gym.spaces.Box | gym.spaces.Discrete):
        return None
    action_space = spaces.to_gymnasium(adapter.action_space)
    if isinstance(action_space, gym.spaces.Discrete):
        kinds = "iu"
    elif isinstance(action_space, gym.spaces.Box):
        kinds = "f" if np.issubdtype(action_space.dtype, np.floating) else "iu"
    else:
        return None
    assert action_space.dtype is not None
    return RowsPlan(
        predict_batch=batch,
        action_spec=adapter.action_space,
        action_shape=tuple(action_space.shape or ()),
        action_dtype=np.dtype(action_space.dtype),
        kinds=kinds,
    )


def _through_codec(plan: RowsPlan, output: Any, rows: int) -> np.ndarray:
    """The message path's encode (and decode) of an unusual output.

    Raises:
        ModelFault: the output does not fit the action space.
    """
    try:
        frame = spaces.encode_stacked(plan.action_spec, output, rows)
        decoded = spaces.decode_stacked(plan.action_spec, frame, rows)
    except ENCODE_ERRORS as exc:
        raise encode_fault(exc) from None
    return np.asarray(decoded, dtype=plan.action_dtype)


async def predict_rows(plan: RowsPlan, observations: np.ndarray, invoke: Invoke) -> np.ndarray:
    """``predict_batch(observations)`` through ``invoke``, coerced to the action space.

    Cancellation: whatever ``invoke`` does.

    Raises:
        ModelFault: the policy raised, or its output does not fit the action space.
    """
    rows = len(observations)
    try:
        output = await invoke(plan.predict_batch, observations)
    except Exception as exc:  # the user's policy failed: a ModelError naming the exception
        raise ModelFault.from_exception(exc) from exc
    if isinstance(output, np.ndarray):
        if output.dtype.kind in plan.kinds and output.shape == (rows, *plan.action_shape):
            if output.dtype == plan.action_dtype:
                return output
            return output.astype(plan.action_dtype)
    return _through_codec(plan, output, rows)
