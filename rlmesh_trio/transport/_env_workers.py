"""Threads for the env server's env calls, with a cheap wake-up of the event loop.

Leaner than ``loop.run_in_executor`` (a concurrent.futures future and two hops
per call): threads take jobs from one FIFO queue, and a finished job resolves
its waiter through the serving loop's ``call_soon_threadsafe``. Jobs start in
submission order, which the env host's scheduler relies on (an earlier request
always gets a thread before a later one that waits for it).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from . import _server_loop as aio

__all__ = ["EnvWorkers"]

T = TypeVar("T")

_STOP = object()
_WAKE = object()


class EnvWorkers:
    """A FIFO of blocking env calls and ``size`` daemon threads that run them; with
    ``size=0`` another thread runs them (:meth:`work_here`: the one that called a
    blocking ``serve()``, for envs tied to the thread that made them)."""

    def __init__(self, size: int) -> None:
        self._schedule: Callable[..., Any] | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"rlmesh-trio-env-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def bind_loop(self, loop: aio.AsyncioLoop) -> None:
        """Report finished jobs to a plain asyncio loop (``call_soon_threadsafe``)."""
        self._schedule = loop.call_soon_threadsafe

    def submit(self, fn: Callable[..., T], *args: Any) -> aio.AsyncioFuture[T]:
        """Run ``fn(*args)`` on a worker; the returned future resolves on the event loop.

        Asyncio side only. Cancelling the future does not stop the call (an env
        call cannot be interrupted); its result is then dropped.

        Raises:
            RuntimeError: the pool is stopped.
        """
        if self._stopped:
            raise RuntimeError("the env worker pool is stopped")
        future: aio.AsyncioFuture[T] = aio.running_loop().create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        self._jobs.put((fn, args, settle))
        return future

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
                self._run(*job)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], settle: Any) -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:
            result, error = None, exc
        schedule = self._schedule
        if schedule is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed; nobody waits any more
                schedule(settle, result, error)
