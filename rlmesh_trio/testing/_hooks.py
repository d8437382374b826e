"""RecordingHooks: a ``RuntimeHooks`` that remembers every event, in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .._protocol import spaces_pb
from ..runtime._events import ActionReceivedEvent, ObservationEmittedEvent
from ..runtime._hooks import EVENT_NAMES, TRANSFORM_NAMES, RuntimeHooks

__all__ = ["HookFailure", "RecordingHooks"]

Transform = Callable[[Any], Awaitable[spaces_pb.SpaceValue | None]]


class HookFailure(Exception):
    """What ``RecordingHooks`` raises when told to fail."""


class RecordingHooks(RuntimeHooks):
    """Records ``(name, event)`` for every hook call, transforms included.

    * ``fail_events``: event names whose hook raises :class:`HookFailure`
      (after recording) -- the route must log it and go on.
    * ``fail_transform`` / ``fail_transform_at``: the named transform raises on
      its n-th call (1-based) -- the route must fail with ``HookError``.
    * ``transform_observation_fn`` / ``transform_action_fn``: async callables
      ``(event) -> SpaceValue | None`` used as the transforms.
    """

    def __init__(
        self,
        *,
        fail_events: Iterable[str] = (),
        fail_transform: str | None = None,
        fail_transform_at: int = 1,
        transform_observation_fn: Transform | None = None,
        transform_action_fn: Transform | None = None,
    ) -> None:
        unknown = set(fail_events) - set(EVENT_NAMES)
        if unknown:
            raise ValueError(f"unknown hook event(s): {sorted(unknown)}")
        if fail_transform is not None and fail_transform not in TRANSFORM_NAMES:
            raise ValueError(f"unknown transform {fail_transform!r}")
        self.fail_events = frozenset(fail_events)
        self.fail_transform = fail_transform
        self.fail_transform_at = fail_transform_at
        self.transform_observation_fn = transform_observation_fn
        self.transform_action_fn = transform_action_fn
        self.events: list[tuple[str, Any]] = []
        self._transform_calls: dict[str, int] = {}

    def names(self) -> list[str]:
        """Hook names in call order."""
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[Any]:
        """The events passed to hook ``name``, in order."""
        return [event for n, event in self.events if n == name]

    async def _record(self, name: str, event: Any) -> None:
        self.events.append((name, event))
        if name in self.fail_events:
            raise HookFailure(f"injected {name} failure")

    async def _transform(
        self, name: str, event: Any, fn: Transform | None
    ) -> spaces_pb.SpaceValue | None:
        self.events.append((name, event))
        count = self._transform_calls[name] = self._transform_calls.get(name, 0) + 1
        if self.fail_transform == name and count == self.fail_transform_at:
            raise HookFailure(f"injected {name} failure")
        return await fn(event) if fn is not None else None

    async def session_started(self, event: Any) -> None:
        await self._record("session_started", event)

    async def episode_started(self, event: Any) -> None:
        await self._record("episode_started", event)

    async def episode_completed(self, event: Any) -> None:
        await self._record("episode_completed", event)

    async def action_received(self, event: Any) -> None:
        await self._record("action_received", event)

    async def step_completed(self, event: Any) -> None:
        await self._record("step_completed", event)

    async def observation_emitted(self, event: Any) -> None:
        await self._record("observation_emitted", event)

    async def telemetry_window(self, event: Any) -> None:
        await self._record("telemetry_window", event)

    async def telemetry_summary(self, event: Any) -> None:
        await self._record("telemetry_summary", event)

    async def session_ended(self, event: Any) -> None:
        await self._record("session_ended", event)

    async def session_failed(self, event: Any) -> None:
        await self._record("session_failed", event)

    async def log(self, event: Any) -> None:
        await self._record("log", event)

    async def transform_observation(
        self, event: ObservationEmittedEvent
    ) -> spaces_pb.SpaceValue | None:
        return await self._transform("transform_observation", event, self.transform_observation_fn)

    async def transform_action(self, event: ActionReceivedEvent) -> spaces_pb.SpaceValue | None:
        return await self._transform("transform_action", event, self.transform_action_fn)
