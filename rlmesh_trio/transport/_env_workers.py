"""Threads for the env server's env calls, with a cheap wake-up of the event loop.

``loop.run_in_executor`` on the trio-asyncio loop costs about 200 µs per call
(a Trio task, a Trio worker thread and two future hops); this pool costs about
70 µs: threads take jobs from one FIFO queue, and a finished job resolves its
waiter through the Trio token (``run_sync_soon``), which runs the callback on
the thread that runs both Trio and the asyncio loop.

Two ways to supply the threads: ``EnvWorkers(n)`` starts ``n`` daemon
threads; ``EnvWorkers(0)`` starts none, and some other thread (the one that
called a blocking ``serve()``, for envs tied to the thread that made them)
runs the jobs with :meth:`EnvWorkers.work_here`.

The queue is FIFO, so jobs start in submission order; the env host's
scheduler relies on that (an earlier request always gets a thread before a
later one that waits for it).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from . import _bridge

__all__ = ["EnvWorkers"]

T = TypeVar("T")

_STOP = object()
_WAKE = object()


class EnvWorkers:
    """A FIFO of blocking env calls and the threads that run them."""

    def __init__(
        self, size: int, token: trio.lowlevel.TrioToken | None = None, *, name: str = "env"
    ) -> None:
        if size < 0:
            raise ValueError("the worker pool size must be >= 0")
        self._schedule: Callable[..., Any] | None = None if token is None else token.run_sync_soon
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"rlmesh-trio-{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def bind(self, token: trio.lowlevel.TrioToken) -> None:
        """Set the Trio run that finished jobs report back to."""
        self._schedule = token.run_sync_soon

    def bind_loop(self, loop: Any) -> None:
        """Report finished jobs to a plain asyncio loop (``call_soon_threadsafe``)."""
        self._schedule = loop.call_soon_threadsafe

    def submit(self, fn: Callable[..., T], *args: Any) -> _bridge.AsyncioFuture[T]:
        """Run ``fn(*args)`` on a worker; the returned future resolves on the event loop.

        Asyncio side only. Cancelling the future does not stop the call (an env
        call cannot be interrupted); its result is then dropped.
        """
        if self._stopped:
            raise RuntimeError("the env worker pool is stopped")
        future: _bridge.AsyncioFuture[T] = _bridge.running_loop().create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        self._jobs.put((fn, args, settle))
        return future

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Trio side: run ``fn(*args)`` on a worker and wait for it.

        Cancellation: the wait is abandoned; the call itself runs to completion.
        """
        done = trio.Event()
        outcome: list[Any] = []

        def settle(result: Any, error: BaseException | None) -> None:
            outcome.append((result, error))
            done.set()

        self._jobs.put((fn, args, settle))
        await done.wait()
        result, error = outcome[0]
        if error is not None:
            raise error
        return result  # type: ignore[no-any-return]

    def stop(self) -> None:
        """Let idle threads exit; a thread inside a slow env call exits when it returns."""
        if self._stopped:
            return
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(_STOP)

    def wake(self) -> None:
        """Unblock :meth:`work_here` so it can notice that it should return."""
        self._jobs.put(_WAKE)

    def work_here(self, until: threading.Event) -> None:
        """Run jobs on the calling thread until ``until`` is set (blocking)."""
        self._work(until)

    def _work(self, until: threading.Event | None = None) -> None:
        while until is None or not until.is_set():
            job = self._jobs.get()
            if job is _STOP:
                return
            if job is not _WAKE:
                self._run(job)

    def _run(self, job: Any) -> None:
        fn, args, settle = job
        try:
            result = fn(*args)
        except BaseException as exc:
            self._report(settle, None, exc)
        else:
            self._report(settle, result, None)

    def _report(self, settle: Any, result: Any, error: BaseException | None) -> None:
        schedule = self._schedule
        if schedule is None:
            return
        try:
            schedule(settle, result, error)
        except (trio.RunFinishedError, RuntimeError):
            pass  # the event loop is gone (or closed); nobody is waiting any more
