"""The timed operation: one explicit timer object per task, two ways to keep time.

Every remote call of a route runs through :meth:`OperationTimer.timed`, which
awaits the call and, past its limit, raises :class:`OperationTimeout` naming
the route, component, operation and runtime step (the seed's error). Which
mechanism enforces the limit is the caller's explicit choice of timer:

* :class:`DeadlineTimer` -- a ``trio.CancelScope(deadline=...)`` per call.
  Any task may use it; the route's session setup (connect, configure,
  resolve), whose calls run concurrently in helper tasks, does.
* :class:`WatchdogTimer` -- the one-scope :class:`OperationWatchdog` of
  ``_watchdog.py`` around a whole hot loop (some 12 us cheaper per call).
  It belongs to the one task that entered :meth:`WatchdogTimer.guard`; the
  driver makes one per loop task (the whole-env loop, each lane).

Both fire at exactly ``start + limit`` on the run's clock (``MockClock``
works) and surface the same error, so a step's timeout means the same
thing whichever timer runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

import trio

from .._errors import OperationTimeout
from ._watchdog import OperationWatchdog

__all__ = ["DeadlineTimer", "OperationTimer", "WatchdogTimer"]

T = TypeVar("T")

#: What a timed operation is, for its ``OperationTimeout``: (component, op, step, limit).
TimedOp = tuple[str, str, int, float]


class OperationTimer(Protocol):
    """Runs one awaited operation within a time limit."""

    async def timed(
        self, component: str, op: str, step: int, timeout: float, call: Awaitable[T]
    ) -> T:
        """Await ``call`` within ``timeout`` seconds of now.

        Cancellation: an enclosing cancellation passes through unchanged.
        Raises:
            OperationTimeout: the call was still running ``timeout`` seconds on.
        """
        ...


class DeadlineTimer:
    """A deadline cancel scope per call: usable from any task."""

    __slots__ = ("_now", "_route_id")

    def __init__(self, route_id: str, now: Callable[[], float]) -> None:
        self._route_id = route_id
        self._now = now

    async def timed(
        self, component: str, op: str, step: int, timeout: float, call: Awaitable[T]
    ) -> T:
        """See :meth:`OperationTimer.timed`."""
        with trio.CancelScope(deadline=self._now() + timeout):
            return await call
        raise OperationTimeout(self._route_id, component, op, step, timeout)


class WatchdogTimer:
    """One watchdog for a task's hot loop: each call only arms and disarms it.

    Enter :meth:`guard` around the loop, in the task that makes the calls;
    :meth:`timed` is only valid inside it.
    """

    __slots__ = ("_now", "_route_id", "_watchdog")

    def __init__(self, route_id: str, now: Callable[[], float]) -> None:
        self._route_id = route_id
        self._now = now
        self._watchdog: OperationWatchdog[TimedOp] = OperationWatchdog()

    def guard(self) -> AbstractAsyncContextManager[None]:
        """Watch the body's timed calls.

        Cancellation: an enclosing cancellation passes through unchanged.
        Raises:
            OperationTimeout: when a timed call of the body ran past its limit.
        """
        route_id = self._route_id
        return self._watchdog.guard(lambda timed: OperationTimeout(route_id, *timed))

    async def timed(
        self, component: str, op: str, step: int, timeout: float, call: Awaitable[T]
    ) -> T:
        """See :meth:`OperationTimer.timed`; the timeout is raised by :meth:`guard`."""
        watchdog = self._watchdog
        watchdog.arm(self._now() + timeout, (component, op, step, timeout))
        try:
            return await call
        finally:
            watchdog.disarm()
