"""``JaxPolicy``: a jax function ``params, obs -> logits/actions`` (or a Flax apply).

The only module that imports jax, and only when a ``JaxPolicy`` is built (the
``jax`` extra). Batching, default actions and error naming are shared with the
other frameworks in :mod:`._frameworks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._errors import InvalidSpec
from .._extras import require
from ._frameworks import ActionRule, FrameworkPolicy, check_action, map_leaves

__all__ = ["JaxPolicy"]

_NO_PARAMS = object()


def _padded_rows(rows: int) -> int:
    """The next power of two: a jitted function compiles once per batch size."""
    return 1 << max(rows - 1, 0).bit_length()


class JaxPolicy(FrameworkPolicy):
    """Evaluate ``fn(params, obs_batch)`` (or ``fn(obs_batch)`` without ``params``).

    ``fn`` is typically ``jax.jit``-ed (a Flax ``model.apply`` with its
    variables as ``params`` works too); with ``jit=True`` (default) a function
    that is not yet jitted is wrapped in ``jax.jit``. Each call gets the
    observations of one or more routes stacked along a leading axis, so
    grouped predicts are ONE call. Because a jitted function compiles once per
    input shape, batches are padded (with copies of their last row) to the
    next power of two and the extra rows dropped: at most log2(routes)
    compilations; ``pad_batches=False`` turns that off.

    ``action`` and ``clip`` as for :class:`~rlmesh_trio.TorchPolicy` (argmax of
    logits for a Discrete space, the output itself for a Box).

    Raises:
        MissingExtra: jax is not installed.
        InvalidSpec: ``fn`` is not callable, or ``action`` is not valid.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        params: Any = _NO_PARAMS,
        action: ActionRule = None,
        clip: bool = False,
        jit: bool = True,
        pad_batches: bool = True,
    ) -> None:
        jax = require("jax", extra="jax", purpose="JaxPolicy")
        if not callable(fn):
            raise InvalidSpec(f"JaxPolicy needs a callable fn, got {type(fn).__name__}")
        self.name = f"JaxPolicy({getattr(fn, '__qualname__', None) or type(fn).__name__})"
        self.action = check_action(action)
        self.clip = bool(clip)
        # A jitted function already has ``lower``; jitting it again would only add a layer.
        self.fn = jax.jit(fn) if jit and not hasattr(fn, "lower") else fn
        self.params = params
        self.pad_batches = bool(pad_batches)

    def forward(self, obs_batch: Any) -> Any:
        """One call of ``fn`` over the (padded) batch; the output cut back to its rows."""
        import jax  # imported by __init__ already (we hold no module: the policy pickles)
        import jax.numpy as jnp

        rows = _rows(obs_batch)
        padded = _padded_rows(rows) if self.pad_batches else rows

        def leaf(value: Any) -> Any:
            value = np.asarray(value)
            if padded != rows:
                value = np.concatenate([value, np.repeat(value[-1:], padded - rows, axis=0)])
            return jnp.asarray(value)

        inputs = map_leaves(obs_batch, leaf)
        if self.params is _NO_PARAMS:
            output = self.fn(inputs)
        else:
            output = self.fn(self.params, inputs)
        if padded == rows:
            return output
        return jax.tree_util.tree_map(lambda value: value[:rows], output)

    def to_numpy(self, output: Any) -> Any:
        """jax arrays as numpy arrays (a view on CPU); other leaves as they are."""
        import jax

        array_type = jax.Array
        return map_leaves(
            output, lambda value: np.asarray(value) if isinstance(value, array_type) else value
        )


def _rows(obs_batch: Any) -> int:
    """The batch's row count: the leading length of its first leaf."""
    while isinstance(obs_batch, dict | tuple | list):
        obs_batch = next(iter(obs_batch.values())) if isinstance(obs_batch, dict) else obs_batch[0]
    return int(np.shape(obs_batch)[0])
