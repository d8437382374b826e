"""Where an in-process endpoint runs a blocking user call: inline, or in a worker thread.

A Trio worker-thread handoff costs tens of microseconds of CPU per call,
several times what a CartPole step or a small numpy policy costs. A call
that blocks the Trio thread, on the other hand, stalls every other route and
cannot be interrupted by its timeout. :class:`CallPlacement` picks per
endpoint:

* ``threaded=True``: every call runs in a worker thread and is abandoned at
  its deadline (``abandon_on_cancel=True``), so a timeout fires AT the
  deadline even while the call is still running.
* ``threaded=False``: every call runs inline on the Trio thread. It cannot be
  interrupted; when it returns after its deadline the caller's timeout fires
  right then (see :func:`settle_inline`), so the operation still fails with
  the caller's timeout error, only late.
* ``threaded=None`` (adaptive, the default): the first :data:`PROBE_CALLS`
  calls run in a thread (so a call that hangs from the start is still cut off
  at its deadline) and are timed. If no more than a quarter of them were
  slow (more than ``inline_limit`` of CPU, or blocked for many times it; a
  loaded machine preempts a cheap call now and then) the endpoint switches to
  inline calls. Two slow inline calls in a row (one alone may be a fluke; an
  inline call is slow by the same test as a probe, so a cheap call that a
  loaded machine preempted is not; its CPU time is read only after a call ran
  over the limit, see ``CallPlacement._judged``) send it back to threaded probes; after
  :data:`MAX_DEMOTIONS` such returns, or a probe round that fails, it stays
  threaded for good. With ``start_inline=True`` the endpoint skips the first
  probe round and starts inline (the in-process model does: policies were
  always called inline, and a round of threaded probes on every model as well
  as every env would make the number of busy
  worker threads depend on how the routes happen to interleave).

Worker threads and the GIL: an inline endpoint's time-slice turn is a scheduler
pass, whose I/O poll drops the GIL for an instant and takes it straight back.
CPython only forces a switch to a waiting thread after a full switch interval
(5 ms) with no drop, and each such drop restarts that wait, so a worker thread
(another endpoint's probe or threaded call, finished or not) got the GIL only
by winning a wake-up race: with a few other threads about, a CartPole step in a
thread took up to seconds and the route's watchdog rightly timed it out. So
while any threaded call is in flight a turn also releases the GIL for
:data:`GIL_HANDOFF` seconds, long enough for a waiting worker to take it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from ._watchdog import current_watchdog

__all__ = [
    "BLOCKING_FACTOR",
    "DEFAULT_INLINE_LIMIT",
    "GIL_HANDOFF",
    "MAX_DEMOTIONS",
    "PROBE_CALLS",
    "TIME_SLICE",
    "CallPlacement",
    "settle_inline",
    "threads_in_flight",
]

T = TypeVar("T")

#: Calls timed in a worker thread before an adaptive endpoint may go inline.
PROBE_CALLS = 8
#: Inline spells an adaptive endpoint may lose to a slow call before it stays threaded.
MAX_DEMOTIONS = 3
#: A probe whose wall time exceeds this many ``inline_limit`` is slow whatever its CPU time
#: (it blocked: on I/O, a lock, a sleep); below it, waiting for the GIL is the likely cause.
BLOCKING_FACTOR = 25
#: An adaptive endpoint runs calls inline only while each takes less than this (seconds).
#: A thread handoff costs ~50 us; a call of 1 ms pays at most ~5% for running in a thread,
#: while an inline call of 1 ms holds every other route up for that long.
DEFAULT_INLINE_LIMIT = 0.001
#: An endpoint running inline yields to the scheduler at least this often (seconds), so
#: routes whose env and policy both run inline still take turns with other tasks.
TIME_SLICE = 0.002
#: How long a time-slice turn releases the GIL while worker-thread calls are in flight
#: (seconds): enough for a woken waiting thread to take it (see the module doc).
GIL_HANDOFF = 0.0002

#: Worker-thread calls of every in-process endpoint not yet back (changed on Trio threads;
#: a plain count: one process-wide GIL is what they compete for).
_threads_in_flight = 0


def threads_in_flight() -> int:
    """How many in-process worker-thread calls have not returned to their Trio task yet."""
    return _threads_in_flight


async def _in_thread(fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter | None) -> T:
    """``trio.to_thread.run_sync(fn, *args)``, abandoned on cancel, counted while in flight."""
    global _threads_in_flight
    _threads_in_flight += 1
    try:
        return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True, limiter=limiter)
    finally:
        _threads_in_flight -= 1


async def settle_inline(*, yield_now: bool = False) -> None:
    """After an inline call: let a deadline that passed during it fire now.

    The call never yielded, so neither a deadline scope nor the route's
    operation watchdog had a chance to fire. If the operation is past due,
    the watchdog is fired here and the caller sees ``trio.Cancelled`` (which
    the route turns into its ``OperationTimeout``); a pending cancellation is
    delivered too. Otherwise this returns without a scheduler pass, unless
    ``yield_now`` asks for one (to give other tasks a turn).
    """
    now = trio.current_time()
    watchdog = current_watchdog()
    if watchdog is not None:
        # A route's hot loop: its operation deadlines live in the watchdog (walking the
        # cancel-scope stack for the effective deadline would cost more than the env step).
        watchdog.fire_if_due(now)
    elif now >= trio.current_effective_deadline():
        yield_now = True  # the scheduler turns the passed deadline into Cancelled
    if yield_now:
        await trio.lowlevel.checkpoint()
    else:
        await trio.lowlevel.checkpoint_if_cancelled()


class CallPlacement:
    """Runs one endpoint's blocking calls inline or in a worker thread (see module doc).

    ``limiter`` bounds the endpoint's worker threads (an abandoned call keeps
    its token until it really returns, so calls stay serialised when the
    limiter has one token). ``time_slice`` (seconds, or None for never)
    makes inline calls yield to the scheduler at least that often.
    ``settle=False`` leaves :func:`settle_inline` after an inline call to the
    caller (who then must call it before its result is used).
    ``start_inline`` starts an adaptive placement inline (see the module doc).
    Raises
    ``ValueError`` for a negative ``inline_limit``.
    """

    __slots__ = (
        "_demotions",
        "_fixed",
        "_inline",
        "_last_yield",
        "_limiter",
        "_measure_cpu",
        "_probes_left",
        "_settle",
        "_slow_probes",
        "_time_slice",
        "_was_slow",
        "inline_limit",
    )

    def __init__(
        self,
        threaded: bool | None = None,
        *,
        inline_limit: float = DEFAULT_INLINE_LIMIT,
        limiter: trio.CapacityLimiter | None = None,
        time_slice: float | None = None,
        settle: bool = True,
        start_inline: bool = False,
    ) -> None:
        if not inline_limit >= 0:
            raise ValueError(f"inline_limit must be >= 0 seconds, got {inline_limit!r}")
        self.inline_limit = float(inline_limit)
        self._fixed = threaded is not None
        self._inline = threaded is False or (threaded is None and start_inline)
        self._probes_left = 0 if self._fixed or self._inline else PROBE_CALLS
        self._slow_probes = 0
        self._demotions = 0
        self._was_slow = False
        self._measure_cpu = False
        self._limiter = limiter
        self._last_yield = 0.0
        self._settle = settle
        self._time_slice = math.inf if time_slice is None else time_slice

    @property
    def inline(self) -> bool:
        """Whether the next call runs on the Trio thread."""
        return self._inline

    @property
    def settles(self) -> bool:
        """Whether :meth:`run` settles after every inline call (else only on a time-slice turn)."""
        return self._settle

    @property
    def adaptive(self) -> bool:
        return not self._fixed

    def set_limiter(self, limiter: trio.CapacityLimiter) -> None:
        """Bound the worker threads (set once the endpoint knows how many it needs)."""
        self._limiter = limiter

    async def run(self, fn: Callable[..., T], *args: Any, rows: int = 1) -> T:
        """Call ``fn(*args)`` where the placement says; return its result.

        ``rows``: how many single calls this one stands for (a fused batch of
        several routes' rows). An inline call is judged slow against
        ``rows`` times the limit: it replaces that many calls, each of which
        could have held the thread up to the limit.

        Cancellation: a threaded call is abandoned (it finishes in its thread,
        its result dropped); an inline call runs to completion, then
        :func:`settle_inline` delivers a deadline that passed meanwhile.
        """
        if self._inline:
            result, turn = self.call_inline(fn, *args, rows=rows)
            if turn or self._settle:
                await settle_inline(yield_now=turn)
            return result
        if self._probes_left <= 0:
            return await self.run_threaded(fn, *args)
        return await self._probe(fn, *args, rows=rows)

    def call_inline(self, fn: Callable[..., T], *args: Any, rows: int = 1) -> tuple[T, bool]:
        """The inline half of :meth:`run` (call only while :attr:`inline`): ``fn(*args)``
        on this thread, judged if adaptive; returns its result and whether the time
        slice is up. The caller must then ``await settle_inline(yield_now=turn)``
        before using the result (as :meth:`run` does), one coroutine frame less.

        Raises:
            Exception: whatever ``fn`` raised (then nothing is judged).
        """
        if self._fixed:
            result = fn(*args)
            ended = time.perf_counter()
        else:
            result, ended = self._judged(fn, args, rows)
        if ended - self._last_yield < self._time_slice:
            return result, False
        self._last_yield = ended
        if _threads_in_flight:
            # Let a worker thread waiting for the GIL take it (see the module doc).
            time.sleep(GIL_HANDOFF)
        return result, True

    def _judged(self, fn: Callable[..., T], args: tuple[Any, ...], rows: int) -> tuple[T, float]:
        """Run an adaptive endpoint's inline call and judge it; return its result and end time.

        Judged as a probe is: by this thread's CPU time, or blocking far past the
        limit. A cheap call preempted on a loaded machine is not slow (two such in a
        row sent CartPole steps to threads, where the GIL handoffs cost far more).
        Reading the thread's CPU clock is a system call that costs more than the
        rest of the bookkeeping, so it is read around a call only after the one
        before ran over the limit by wall time: a call over the limit with no CPU
        reading counts as slow for now, and the call after it, timed by CPU, decides
        whether the two in a row demote the endpoint (so two preempted cheap calls
        in a row still do not: the second is judged by its CPU time).
        """
        measure = self._measure_cpu
        cpu = time.thread_time() if measure else 0.0
        started = time.perf_counter()
        result = fn(*args)
        ended = time.perf_counter()
        wall = ended - started
        limit = self.inline_limit * rows
        slow = wall > limit
        # Over the limit: time the next call by CPU; under it, stop timing by CPU.
        self._measure_cpu = slow
        if slow and measure and wall <= BLOCKING_FACTOR * limit:
            slow = time.thread_time() - cpu > limit
        if slow and self._was_slow:
            self._demote()
        self._was_slow = slow
        return result, ended

    def _demote(self) -> None:
        """An inline call was slow: back to threads, probing again unless it keeps happening."""
        self._inline = False
        self._was_slow = False
        self._measure_cpu = False
        self._demotions += 1
        self._slow_probes = 0
        self._probes_left = PROBE_CALLS if self._demotions < MAX_DEMOTIONS else 0

    async def run_threaded(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` in a worker thread whatever the placement; abandoned on cancel."""
        return await _in_thread(fn, *args, limiter=self._limiter)

    async def _probe(self, fn: Callable[..., T], *args: Any, rows: int = 1) -> T:
        spent: list[tuple[float, float]] = []

        def timed() -> T:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args)
            finally:
                spent.append((time.perf_counter() - wall, time.thread_time() - cpu))

        result = await _in_thread(timed, limiter=self._limiter)
        if not spent or self._slow_probe(*spent[0], rows):
            self._slow_probes += 1
        self._probes_left -= 1
        if self._probes_left == 0:
            # The probe round is over: inline if at most a quarter were slow, else threads.
            self._inline = self._slow_probes <= PROBE_CALLS // 4
        return result

    def _slow_probe(self, wall: float, cpu: float, rows: int = 1) -> bool:
        """Whether a threaded call was too slow to run inline.

        Its thread's CPU time decides, not its wall time: a worker thread waits
        for the GIL while the Trio thread runs other routes' inline calls (up
        to the interpreter's switch interval), which says nothing about the
        call. A call that blocks without using CPU is caught by
        :data:`BLOCKING_FACTOR`, or else by the inline check afterwards.
        """
        limit = self.inline_limit * rows
        return cpu > limit or wall > BLOCKING_FACTOR * limit
