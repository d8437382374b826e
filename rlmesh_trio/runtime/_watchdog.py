"""Per-operation timeouts for a task's hot loop, without a cancel scope per operation.

A route step makes two timed remote calls. Entering and leaving a
``trio.CancelScope(deadline=...)`` around each one, and registering and
dropping its deadline, cost about 12 µs per call on the reference machine
(some 8% of a route step's client CPU). An :class:`OperationWatchdog`
instead wraps the whole loop in one cancel scope and watches it from a
helper task: an operation only records what it is and when it is due
(:meth:`~OperationWatchdog.arm`, :meth:`~OperationWatchdog.disarm`: plain
attribute writes), and the helper sleeps until the deadline of the
operation it last saw. On waking it fires if that operation -- or the one
running now -- is past due, and otherwise sleeps until the running one is
due. Ops chain back to back, so the helper wakes about once per timeout
period, not once per operation; a new operation with an earlier deadline
than the helper's alarm moves the alarm forward.

Firing cancels the loop's scope: the operation sees ``trio.Cancelled`` at
its await, exactly as it would from its own deadline scope, and
:meth:`~OperationWatchdog.guard` turns that into the caller's timeout error
when the scope is left. Timing is exact: the alarm is always set to the
due time of an operation (in the run's clock, so ``MockClock`` works).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Generic, TypeVar

import trio

from .._groups import sole_leaf

__all__ = ["OperationWatchdog", "current_watchdog"]

Op = TypeVar("Op")

_CURRENT: ContextVar[OperationWatchdog[object] | None] = ContextVar(
    "rlmesh_trio_watchdog", default=None
)


class OperationWatchdog(Generic[Op]):
    """Deadlines for the operations of one task; ``Op`` describes an operation for its error.

    Use :meth:`guard` around the task's loop; inside it, bracket each
    awaited operation with :meth:`arm` and :meth:`disarm`. Only the task
    that entered :meth:`guard` may arm it (:func:`current_watchdog` checks).
    """

    __slots__ = ("_alarm", "_deadline", "_op", "expired", "scope", "task")

    def __init__(self) -> None:
        #: The scope around the watched loop; cancelled when an operation is past due.
        self.scope = trio.CancelScope()
        #: The operation that ran past its deadline, once fired.
        self.expired: Op | None = None
        self.task: trio.lowlevel.Task | None = None
        self._op: Op | None = None
        self._deadline = math.inf
        self._alarm: trio.CancelScope | None = None

    def arm(self, deadline: float, op: Op) -> None:
        """An operation due by ``deadline`` (run clock) starts now."""
        self._op = op
        self._deadline = deadline
        alarm = self._alarm
        if alarm is not None and deadline < alarm.deadline:
            alarm.deadline = deadline

    def disarm(self) -> None:
        """The operation armed last has finished (in any way)."""
        self._op = None

    def fire_if_due(self, now: float) -> None:
        """Fire now if the armed operation is past due at ``now`` (run clock).

        For an operation that ran without yielding (an inline in-process
        call): the helper task never got to see its deadline pass, so the
        caller's next checkpoint must raise ``trio.Cancelled`` instead.
        """
        if self._op is not None and self.expired is None and now >= self._deadline:
            self.expired = self._op
            self.scope.cancel()

    async def _watch(self) -> None:
        while True:
            with trio.CancelScope(
                deadline=self._deadline if self._op is not None else math.inf
            ) as alarm:
                self._alarm = alarm
                await trio.sleep_forever()
            self._alarm = None
            op = self._op
            if op is not None and trio.current_time() >= self._deadline:
                self.expired = op
                self.scope.cancel()
                return

    @asynccontextmanager
    async def guard(self, on_expiry: Callable[[Op], BaseException]) -> AsyncIterator[None]:
        """Watch the body's operations; raise ``on_expiry(op)`` if one ran past its deadline.

        Cancellation: an enclosing cancellation passes through unchanged;
        only this watchdog's own firing is turned into ``on_expiry(op)``.
        """
        self.task = trio.lowlevel.current_task()
        token = _CURRENT.set(self)  # type: ignore[arg-type]
        try:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch)
                    try:
                        with self.scope:
                            yield
                    finally:
                        nursery.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # The helper never fails, so the group holds the body's own exception:
                # give it back bare, as if no nursery were here.
                leaf = sole_leaf(group)
                if leaf is None:
                    raise
                raise leaf from leaf.__cause__
        except Exception as exc:
            if self.expired is not None:
                raise on_expiry(self.expired) from exc
            raise
        finally:
            _CURRENT.reset(token)
            self._op = None
            self.task = None
        if self.expired is not None:
            raise on_expiry(self.expired)


def current_watchdog() -> OperationWatchdog[object] | None:
    """The watchdog guarding the calling task, if any (never one of another task)."""
    watchdog = _CURRENT.get()
    if watchdog is not None and watchdog.task is trio.lowlevel.current_task():
        return watchdog
    return None
