"""Runtime hooks: observe a route's events and transform values in-line.

Event methods are best-effort: the driver logs a failing event hook and the
route goes on. Transforms are fatal: a failing ``transform_observation`` or
``transform_action`` ends the route with :class:`~rlmesh_trio.HookError`.

A transform returns the (possibly new) ``SpaceValue`` to send on, or
``None`` meaning "unchanged". Hooks run in the route's task, in the hot
loop: keep them quick, and never swallow ``trio.Cancelled``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import attrs

from .._errors import InvalidSpec
from .._protocol import spaces_pb
from ._events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    ObservationEmittedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
    TelemetrySummaryEvent,
    TelemetryWindowEvent,
)

__all__ = [
    "EVENT_NAMES",
    "TRANSFORM_NAMES",
    "HookChain",
    "RuntimeHooks",
    "as_runtime_hooks",
    "check_hooks",
    "overrides",
]

EVENT_NAMES = (
    "session_started",
    "episode_started",
    "episode_completed",
    "action_received",
    "step_completed",
    "observation_emitted",
    "telemetry_window",
    "telemetry_summary",
    "session_ended",
    "session_failed",
    "log",
)
TRANSFORM_NAMES = ("transform_observation", "transform_action")


class RuntimeHooks:
    """Base class: every method is an async no-op. Override what you need.

    Cancellation: hooks are awaited inside the route's cancel scope and are
    cancelled with it (``session_failed`` runs after the shielded cleanup,
    unshielded).
    """

    async def session_started(self, event: SessionStartedEvent) -> None:
        return None

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        return None

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        return None

    async def action_received(self, event: ActionReceivedEvent) -> None:
        return None

    async def transform_action(self, event: ActionReceivedEvent) -> spaces_pb.SpaceValue | None:
        """Return a replacement action slab, or ``None`` to keep ``event.action``."""
        return None

    async def step_completed(self, event: StepCompletedEvent) -> None:
        return None

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        return None

    async def transform_observation(
        self, event: ObservationEmittedEvent
    ) -> spaces_pb.SpaceValue | None:
        """Return a replacement observation slab, or ``None`` to keep ``event.observation``."""
        return None

    async def telemetry_window(self, event: TelemetryWindowEvent) -> None:
        return None

    async def telemetry_summary(self, event: TelemetrySummaryEvent) -> None:
        return None

    async def session_ended(self, event: SessionEndedEvent) -> None:
        return None

    async def session_failed(self, event: SessionFailedEvent) -> None:
        return None

    async def log(self, event: LogEvent) -> None:
        return None


def overrides(hooks: RuntimeHooks | None, name: str) -> bool:
    """Whether ``hooks`` does anything for ``name``; lets the driver skip building unused events."""
    if hooks is None:
        return False
    if isinstance(hooks, HookChain):
        return any(overrides(h, name) for h in hooks.hooks)
    base = getattr(RuntimeHooks, name, None)
    implementation = getattr(type(hooks), name, None)
    # A duck-typed hooks object without this method does nothing for it.
    return implementation is not None and implementation is not base


HOOK_NAMES = EVENT_NAMES + TRANSFORM_NAMES


def check_hooks(value: Any, where: str) -> None:
    """Refuse what is not hooks, before any route starts.

    Accepted: a :class:`RuntimeHooks` instance, or any object that defines
    one or more of the hook methods (``EVENT_NAMES`` and ``TRANSFORM_NAMES``),
    each as an ``async def``; the methods it leaves out do nothing.

    Raises:
        InvalidSpec: naming ``where`` and the object's type, or the hook
            method that is not async.
    """
    if isinstance(value, RuntimeHooks):
        return
    defined = [name for name in HOOK_NAMES if callable(getattr(value, name, None))]
    if not defined:
        raise InvalidSpec(
            f"{where}: {type(value).__name__} object is not runtime hooks (a RuntimeHooks "
            f"instance or an object with async hook methods such as episode_completed)"
        )
    for name in defined:
        if not inspect.iscoroutinefunction(getattr(value, name)):
            raise InvalidSpec(
                f"{where}: {type(value).__name__}.{name} must be an async method (async def)"
            )


def as_runtime_hooks(value: Any, where: str = "hooks") -> RuntimeHooks:
    """``value`` as a :class:`RuntimeHooks` (a duck-typed object goes in a one-hook chain).

    Raises:
        InvalidSpec: ``value`` is not hooks (see :func:`check_hooks`).
    """
    check_hooks(value, where)
    return value if isinstance(value, RuntimeHooks) else HookChain([value])


class HookChain(RuntimeHooks):
    """Several hooks as one.

    Events go to every hook in order; if some fail, the first error is raised
    after all have run. Transforms run in order, each seeing the value the
    previous one produced, and stop at the first error. Each hook is a
    :class:`RuntimeHooks` or an object with some async hook methods (the
    others are skipped).

    Raises:
        InvalidSpec: (at construction) an element is not hooks, naming its
            index and type.
    """

    def __init__(self, hooks: Iterable[RuntimeHooks]) -> None:
        self.hooks: tuple[RuntimeHooks, ...] = tuple(hooks)
        for index, hook in enumerate(self.hooks):
            check_hooks(hook, f"HookChain hooks[{index}]")

    def _with(self, name: str) -> list[Any]:
        return [method for hook in self.hooks if (method := getattr(hook, name, None))]

    async def _fan_out(self, name: str, event: object) -> None:
        first: Exception | None = None
        for method in self._with(name):
            try:
                await method(event)
            except Exception as exc:  # Cancelled is a BaseException and passes through
                if first is None:
                    first = exc
        if first is not None:
            raise first

    async def session_started(self, event: SessionStartedEvent) -> None:
        await self._fan_out("session_started", event)

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        await self._fan_out("episode_started", event)

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        await self._fan_out("episode_completed", event)

    async def action_received(self, event: ActionReceivedEvent) -> None:
        await self._fan_out("action_received", event)

    async def step_completed(self, event: StepCompletedEvent) -> None:
        await self._fan_out("step_completed", event)

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        await self._fan_out("observation_emitted", event)

    async def telemetry_window(self, event: TelemetryWindowEvent) -> None:
        await self._fan_out("telemetry_window", event)

    async def telemetry_summary(self, event: TelemetrySummaryEvent) -> None:
        await self._fan_out("telemetry_summary", event)

    async def session_ended(self, event: SessionEndedEvent) -> None:
        await self._fan_out("session_ended", event)

    async def session_failed(self, event: SessionFailedEvent) -> None:
        await self._fan_out("session_failed", event)

    async def log(self, event: LogEvent) -> None:
        await self._fan_out("log", event)

    async def transform_action(self, event: ActionReceivedEvent) -> spaces_pb.SpaceValue | None:
        changed = False
        for transform in self._with("transform_action"):
            value = await transform(event)
            if value is not None:
                event = attrs.evolve(event, action=value)
                changed = True
        return event.action if changed else None

    async def transform_observation(
        self, event: ObservationEmittedEvent
    ) -> spaces_pb.SpaceValue | None:
        changed = False
        for transform in self._with("transform_observation"):
            value = await transform(event)
            if value is not None:
                event = attrs.evolve(event, observation=value)
                changed = True
        return event.observation if changed else None
