"""Transform hooks on the values gymnasium users hold (numpy arrays, ints, dicts, tuples).

The slab-level transforms of :class:`~rlmesh_trio.RuntimeHooks`
(``transform_observation`` / ``transform_action``) see the wire's
``SpaceValue`` messages. :class:`ValueTransform` decodes them for you, calls
your function with the value as gymnasium hands it out, and encodes what you
return.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import spaces
from ..runtime._events import ActionReceivedEvent, ObservationEmittedEvent
from ..runtime._hooks import RuntimeHooks

__all__ = ["ValueTransform"]

#: ``fn(value, event) -> new value`` or ``None`` (unchanged).
ValueFn = Callable[[Any, Any], Any]


class ValueTransform(RuntimeHooks):
    """Rewrite observations and actions as gymnasium values.

    Give functions (``ValueTransform(action=clip)``) or subclass and override
    :meth:`observation` / :meth:`action`. Each is called with
    ``(value, event)``:

    - for a route over one env, ``value`` is one observation or action exactly as
      gymnasium gives it (a Box is an ``np.ndarray``, a Discrete an ``int``, a
      Dict a ``dict``, ...);
    - when the event covers several lanes (a vector env, or lanes of one server),
      ``value`` is the batch as a gymnasium ``VectorEnv`` gives it: every leaf
      with a leading axis of ``len(event.env_indices)`` rows.

    Return the new value (the same form), or ``None`` to leave it unchanged.
    Observations are transformed before the model sees them, actions before the
    env does. Values that do not fit the space end the route with
    :class:`~rlmesh_trio.HookError`, as any failing transform does.

    The raw ``SpaceValue`` slab stays on ``event.observation`` / ``event.action``,
    and a :class:`~rlmesh_trio.RuntimeHooks` subclass that overrides
    ``transform_observation`` / ``transform_action`` still works on slabs.

    Cancellation: the functions run synchronously in the route's task (keep
    them quick); a subclass's overrides may be ``async`` and are awaited there.
    """

    def __init__(
        self, *, observation: ValueFn | None = None, action: ValueFn | None = None
    ) -> None:
        self._observation_fn = observation
        self._action_fn = action

    async def observation(self, value: Any, event: ObservationEmittedEvent) -> Any:
        """The new observation for ``value``, or ``None`` (unchanged)."""
        if self._observation_fn is None:
            return None
        return self._observation_fn(value, event)

    async def action(self, value: Any, event: ActionReceivedEvent) -> Any:
        """The new action for ``value``, or ``None`` (unchanged)."""
        if self._action_fn is None:
            return None
        return self._action_fn(value, event)

    def _wants(self, name: str) -> bool:
        fn = self._observation_fn if name == "observation" else self._action_fn
        return fn is not None or getattr(type(self), name) is not getattr(ValueTransform, name)

    async def transform_observation(
        self, event: ObservationEmittedEvent
    ) -> spaces.SpaceValue | None:
        if not self._wants("observation"):
            return None
        return await _rewrite(
            event.observation_space, event.observation, len(event.env_indices),
            lambda value: self.observation(value, event),
        )  # fmt: skip

    async def transform_action(self, event: ActionReceivedEvent) -> spaces.SpaceValue | None:
        if not self._wants("action"):
            return None
        return await _rewrite(
            event.action_space, event.action, len(event.env_indices),
            lambda value: self.action(value, event),
        )  # fmt: skip


async def _rewrite(
    spec: spaces.SpaceSpec | None, slab: spaces.SpaceValue | None, rows: int, call: Any
) -> spaces.SpaceValue | None:
    """Decode ``slab``, hand it to ``call``, encode the answer (``None``: unchanged)."""
    if spec is None or slab is None:
        return None  # nothing described to decode (no space, no value)
    single = rows == 1
    value = spaces.decode(spec, slab) if single else spaces.decode_stacked(spec, slab, rows)
    new = await call(value)
    if new is None:
        return None
    return spaces.encode(spec, new) if single else spaces.encode_stacked(spec, new, rows)
