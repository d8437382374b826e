"""Trio-side ways of running a user policy function (see ``Invoke``)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

import trio

from ..runtime._placement import CallPlacement
from ._policy import PolicyFn

__all__ = ["PlacedInvoker", "ThreadedInvoker"]


class ThreadedInvoker:
    """Run sync policy functions in a Trio worker thread, one call at a time.

    Async functions are awaited in the calling task. Calls are serialised
    through a capacity limiter of one (like 0.1.0's handler lock): policies
    are rarely thread-safe, and fusing rows into ``predict_batch`` is the
    better way to use a batch-friendly model.

    Cancellation: a cancelled call abandons nothing: the worker thread is
    waited for (``abandon_on_cancel=False``), because a half-run policy call
    may hold framework state.
    """

    def __init__(self, limiter: trio.CapacityLimiter | None = None) -> None:
        self._limiter = limiter or trio.CapacityLimiter(1)

    async def __call__(self, fn: PolicyFn, arg: Any) -> Any:
        if fn.is_async:
            return await fn.fn(arg)
        return await trio.to_thread.run_sync(fn.fn, arg, limiter=self._limiter)


class PlacedInvoker:
    """Run sync policy functions where a :class:`~rlmesh_trio.runtime._placement.CallPlacement` says
    (inline, in a worker thread, or adaptively); async functions are awaited in the
    calling task.

    Threaded calls go one at a time through a capacity limiter of one, as with
    :class:`ThreadedInvoker`. Cancellation: unlike :class:`ThreadedInvoker`, a
    threaded call is abandoned at once (its thread finishes on its own and
    keeps the limiter's token until then, so the next call still waits for
    it): an in-process route's predict timeout must fire at its deadline.
    ``rows`` > 1 (a grouped predict's invoker) has the placement judge each
    call as that many single calls (see ``CallPlacement.run``).
    """

    def __init__(self, placement: CallPlacement, *, rows: int = 1) -> None:
        self.placement = placement
        #: The rows a call carries (a fused group's): the placement judges it per row.
        self.rows = rows

    def call_now(self, fn: PolicyFn, arg: Any) -> tuple[Any, bool] | None:
        """Call a sync ``fn(arg)`` inline right now if the placement runs calls inline and
        settles only on time-slice turns: its result and whether the slice is up (then
        ``await settle_inline(yield_now=True)``, as awaiting :meth:`__call__` would).
        None: nothing was called; await :meth:`__call__` instead.

        Raises:
            Exception: whatever ``fn`` raised.
        """
        placement = self.placement
        if fn.is_async or not placement.inline or placement.settles:
            return None
        return placement.call_inline(fn.fn, arg, rows=self.rows)

    def __call__(self, fn: PolicyFn, arg: Any) -> Awaitable[Any]:
        # A plain function handing back the awaitable: one coroutine frame less per
        # predict (the in-process hot path); awaiting it is the same as awaiting a wrapper.
        if fn.is_async:
            return cast(Awaitable[Any], fn.fn(arg))
        return self.placement.run(fn.fn, arg, rows=self.rows)
