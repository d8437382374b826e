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

Each also has a plain ``with`` form, :meth:`OperationTimer.limit`, for the
per-step calls: no coroutine of its own around the call, so a suspended step
has one frame less to resume and one object less alive per route.

Both fire at exactly ``start + limit`` on the run's clock (``MockClock``
works) and surface the same error, so a step's timeout means the same
thing whichever timer runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
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

    def limit(
        self, component: str, op: str, step: int, timeout: float
    ) -> AbstractContextManager[None]:
        """The body, which awaits one operation, within ``timeout`` seconds of now.

        ``with timer.limit(...): reply = await call`` means the same as
        ``reply = await timer.timed(..., call)``.

        Cancellation: an enclosing cancellation passes through unchanged.
        Raises:
            OperationTimeout: the body was still running ``timeout`` seconds on.
        """
        ...


class _DeadlineLimit:
    """A deadline scope that turns its own expiry into the operation's timeout."""

    __slots__ = ("_route_id", "_scope", "_timed")

    def __init__(self, scope: trio.CancelScope, route_id: str, timed: TimedOp) -> None:
        self._scope = scope
        self._route_id = route_id
        self._timed = timed

    def __enter__(self) -> None:
        self._scope.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        scope = self._scope
        # The scope swallowed its own expiry: that is this operation's timeout.
        if scope.__exit__(kind, exc, tb) and scope.cancelled_caught:
            raise OperationTimeout(self._route_id, *self._timed) from None


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

    def limit(
        self, component: str, op: str, step: int, timeout: float
    ) -> AbstractContextManager[None]:
        """See :meth:`OperationTimer.limit`."""
        scope = trio.CancelScope(deadline=self._now() + timeout)
        return _DeadlineLimit(scope, self._route_id, (component, op, step, timeout))


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

    def limit(
        self, component: str, op: str, step: int, timeout: float
    ) -> AbstractContextManager[None]:
        """See :meth:`OperationTimer.limit`: arms now; leaving the body disarms.

        The timer is its own context manager (nothing allocated per call), so
        one limit at a time: the loop's calls never nest.
        """
        self._watchdog.arm(self._now() + timeout, (component, op, step, timeout))
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._watchdog.disarm()
