"""Worker threads for the env server's env calls, with a cheap wake-up of the event loop.

``loop.run_in_executor`` on the trio-asyncio loop costs about 200 µs per call
(a Trio task, a Trio worker thread and two future hops); this pool costs about
70 µs: persistent threads take jobs from one FIFO queue, and a finished job
resolves its asyncio future through the Trio token (``run_sync_soon``), which
runs the callback on the thread that runs both Trio and the asyncio loop.

The queue is FIFO, so jobs start in submission order; the env host's
scheduler relies on that (an earlier request always gets a thread before a
later one that waits for it).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import trio

__all__ = ["EnvWorkers"]

T = TypeVar("T")

_STOP = object()


class EnvWorkers:
    """A fixed pool of daemon threads running blocking env calls for asyncio-side code."""

    def __init__(self, size: int, token: trio.lowlevel.TrioToken, *, name: str = "env") -> None:
        if size < 1:
            raise ValueError("the worker pool needs at least one thread")
        self._token = token
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"rlmesh-trio-{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()
        self._stopped = False

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` in a worker; the returned future resolves on the event loop.

        Asyncio side only. Cancelling the future does not stop the call (an env
        call cannot be interrupted); its result is then dropped.
        """
        if self._stopped:
            raise RuntimeError("the env worker pool is stopped")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fn, args, future))
        return future

    def stop(self) -> None:
        """Let idle threads exit; a thread inside a slow env call exits when it returns."""
        if self._stopped:
            return
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(_STOP)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            fn, args, future = job
            try:
                result = fn(*args)
            except BaseException as exc:
                self._resolve(future, None, exc)
            else:
                self._resolve(future, result, None)

    def _resolve(
        self, future: asyncio.Future[Any], result: Any, error: BaseException | None
    ) -> None:
        def settle() -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        try:
            self._token.run_sync_soon(settle)
        except trio.RunFinishedError:
            pass  # the event loop is gone; nobody is waiting any more
