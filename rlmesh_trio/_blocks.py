"""The lane-block seams: endpoints that work on many lanes per call, on numpy arrays.

A route over N lanes whose env and model both offer a block runs ONE task
that, per round, asks the model once for every waiting lane
(:meth:`LaneBlockModel.predict_rows`, one batched forward pass), steps every
ready lane with one call (:meth:`LaneBlockEnv.step_lanes`), then books
rewards, ends and caps with numpy over the arrays. Per-lane Python runs only
where an episode starts or ends (:meth:`LaneBlockEnv.reset_lanes`).

Both protocols are optional extras next to ``RuntimeEnv``/``RuntimeModel``
(``_endpoints.py``): an endpoint implements them as well, and says per
session whether a block can be used (``block_ready``), since the same class
may wrap shapes that have no block path (a Dict observation space, an env
that resets itself, a per-row policy).

Lanes are numbered ``0 .. num_lanes - 1`` (the env index). Arrays are row
aligned with the ``lanes`` argument of the call. Observations are raw
(``env.observation_space`` values stacked on a leading axis); actions are what
the model's adapter made of its outputs, stacked the same way.

Errors: an endpoint failure raises the route error types of
``rlmesh_trio._errors`` -- :class:`EnvRpcError` (its ``env_index`` names
the lane whose env failed, or returned a NaN, or was sent an invalid action),
:class:`ModelRpcError` (``env_index`` names the row's lane when one row is
at fault) -- with the same message text the message path gives. A block
endpoint does not time its own calls: the caller holds one deadline per
call and turns it into :class:`OperationTimeout`; ``timeout`` is passed on
so a remote peer can bound its side too.

Cancellation: every method may be cancelled by the caller's Trio cancel
scope; the endpoint is then only good for ``close``/``aclose``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs
import numpy as np

__all__ = ["BlockReset", "BlockStep", "LaneBlockEnv", "LaneBlockModel"]


@attrs.frozen(slots=True)
class BlockReset:
    """What :meth:`LaneBlockEnv.reset_lanes` answers, rows in the order of its ``lanes``.

    ``infos`` holds one info dict per reset lane (``None`` when nobody asked).
    ``telemetry`` maps metric names (``endpoint.total``, ``endpoint.user``) to
    milliseconds, as :class:`~rlmesh_trio._endpoints.Reply` does.
    """

    observations: np.ndarray
    infos: Sequence[Mapping[str, Any]] | None = None
    telemetry: Mapping[str, float] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class BlockStep:
    """What :meth:`LaneBlockEnv.step_lanes` answers, rows in the order of its ``lanes``.

    ``rewards`` is float64, ``terminated``/``truncated`` are bool, all of shape
    ``(len(lanes),)``. ``final_infos`` maps the env index of each lane that
    ended on this step (terminated or truncated by the env) to its last info
    dict; lanes that go on have no entry. ``telemetry`` as for :class:`BlockReset`.
    ``durations`` maps the env index of an ended lane to its episode's duration
    (seconds) by the env's own timestamps, where the env sent them (a served
    lane endpoint); a lane without one is timed by the runtime's clock.
    """

    observations: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_infos: Mapping[int, Mapping[str, Any]] = attrs.field(factory=dict)
    telemetry: Mapping[str, float] = attrs.field(factory=dict)
    durations: Mapping[int, float] = attrs.field(factory=dict)


@runtime_checkable
class LaneBlockEnv(Protocol):
    """An env endpoint that resets and steps many lanes per call, on arrays.

    Resets are the caller's (the env never restarts a lane on its own): a lane
    that ended stays ended until :meth:`reset_lanes` names it. Lanes not named
    by :meth:`step_lanes` do not advance their episodes, though an env that
    can only step all its lanes at once (a gymnasium ``VectorEnv``) may step
    them with a filler action and drop what they return: such a lane's next
    use is always a reset.
    """

    @property
    def block_ready(self) -> bool:
        """Whether this session can run as a block (connected, driver-owned resets,
        array observations, an action space the block checks: Discrete or Box)."""
        ...

    @property
    def num_lanes(self) -> int:
        """The number of lanes (env indices ``0 .. num_lanes - 1``)."""
        ...

    async def reset_lanes(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        timeout: float,
        *,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """Start a new episode on each of ``lanes`` (int array, ascending, no repeats)
        with its seed and reset options (row aligned). ``episode_ids`` are the
        runtime's ids of those episodes (row aligned): a served endpoint sends them, so
        the episodes its server completes carry them; an in-process one has no use
        for them.

        Raises:
            EnvRpcError: a lane's reset failed or returned a NaN (``env_index`` set).
        """
        ...

    async def step_lanes(self, lanes: np.ndarray, actions: np.ndarray, timeout: float) -> BlockStep:
        """Step each of ``lanes`` (int array, ascending, no repeats) with its row of
        ``actions`` (``actions.shape[0] == len(lanes)``).

        Raises:
            EnvRpcError: an action is invalid for the action space, a lane's env
                raised or returned a NaN (``env_index`` set).
        """
        ...


@runtime_checkable
class LaneBlockModel(Protocol):
    """A model that answers one batched forward pass over an array of observation rows.

    ``env_id`` is the route's (``RouteSpec.env_id``): a model serves many routes,
    each through the adapter its ResolveAdapter made, so rows are predicted
    the way that route's adapter predicts them.
    """

    def block_ready(self, env_id: str) -> bool:
        """Whether :meth:`predict_rows` can serve route ``env_id`` (its adapter is
        resolved, its policy takes batches, its action space is Discrete or Box and
        its observation space an array)."""
        ...

    async def predict_rows(
        self, env_id: str, observations: np.ndarray, timeout: float
    ) -> np.ndarray:
        """One action row per observation row, through the adapter's policy and coercion:
        the actions stacked on a leading axis, in the action space's dtype.

        Raises:
            ModelRpcError: the policy raised, or its outputs do not fit the action
                space (the message the message path gives for the same outputs).
        """
        ...
