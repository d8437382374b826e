"""Where server code runs: each server on a thread of its own with its own ``trio.run``,
and the env calls' worker threads.

Serving never competes with the caller's Trio run (only for the GIL); the
caller waits for a server's thread through its Trio token, never blocking.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import trio

__all__ = ["EnvWorkers", "ServingThread", "serving_in_thread"]

T = TypeVar("T")


class ThreadedServer(Protocol):
    """What a server thread needs of its server (``ServerBase``, without importing it)."""

    @property
    def _kind(self) -> str: ...
    @property
    def _address(self) -> str | None: ...

    def _close_bound(self) -> float: ...
    def _serve_blocking(self, announce: Callable[[], None]) -> None: ...
    def _refuse_thread(self) -> None: ...
    def _stop_threadsafe(self) -> None: ...
    def _reset_stop(self) -> None: ...


log = logging.getLogger("rlmesh_trio.transport.server")


class ServingThread:
    """``serve(on_listening)`` on a daemon thread (``server._serve_blocking`` unless
    given), ``on_ended()`` once it is done (on that thread); :attr:`failure` is what
    the serve raised."""

    def __init__(
        self,
        server: ThreadedServer,
        *,
        on_listening: Callable[[], None],
        on_ended: Callable[[], None],
        serve: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.server = server
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        # How long stopping may take: the server's close bound plus a second.
        self.bound = server._close_bound() + 1.0
        self._serve = server._serve_blocking if serve is None else serve
        self._on_listening = on_listening
        self._on_ended = on_ended
        name = f"rlmesh-trio-{server._kind}-server"
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        try:
            self._serve(self._on_listening)
        except BaseException as exc:
            self.failure = exc
        finally:
            self.ended.set()
            self._on_ended()

    def raise_failure(self) -> None:
        """For a serve that ended before it listened.

        Raises:
            BaseException: what it raised (RuntimeError when it raised nothing).
        """
        if self.failure is not None:
            raise self.failure
        raise RuntimeError(f"the {self.server._kind} server stopped before it was listening")

    def left_behind(self) -> None:
        log.warning(
            "%s server %s did not stop within %ss; leaving its thread behind",
            self.server._kind,
            self.server._address,
            self.bound,
        )

    async def stop_from_trio(self, finished: trio.Event) -> None:
        """Ask the server to stop and wait for ``finished`` (the thread's end): shielded,
        bounded by :attr:`bound`."""
        self.server._stop_threadsafe()
        with trio.CancelScope(shield=True), trio.move_on_after(self.bound):
            await finished.wait()
        if not finished.is_set():
            self.left_behind()


@asynccontextmanager
async def serving_in_thread(server: ThreadedServer) -> AsyncIterator[trio.Event]:
    """Run ``server._serve_blocking`` on a dedicated thread for the ``async with`` block;
    yields, once listening, an event set when the server stops by itself (an
    accepted remote Shutdown; the block's body keeps running).

    Cancellation: leaving the block (however, even while starting) asks the
    server to stop and waits for its thread, shielded and bounded by the
    server's close bound plus a second: a thread stuck in user code is left
    behind (a daemon thread) with a warning.

    Raises:
        ValueError: an env server built with ``env_thread="caller"``.
        OSError: the server could not listen.
        RuntimeError: the server stopped before it was listening.
        Whatever the server raised while serving or stopping, on leaving the
        block, unless the body raised first (then it is logged).
    """
    server._refuse_thread()
    token = trio.lowlevel.current_trio_token()
    settled, finished = trio.Event(), trio.Event()  # listening or ended; ended

    def tell(fn: Callable[[], None]) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # the caller stopped waiting long ago
            token.run_sync_soon(fn)

    def ended() -> None:
        finished.set()
        settled.set()

    serving = ServingThread(
        server, on_listening=lambda: tell(settled.set), on_ended=lambda: tell(ended)
    )
    server._reset_stop()
    serving.thread.start()
    try:
        await settled.wait()
        # A caller cancelled while we started never enters the block, whatever
        # the checkpoints above did with the cancellation.
        await trio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await serving.stop_from_trio(finished)  # cancelled while starting
        raise
    if finished.is_set():
        serving.raise_failure()
    body_failed = True
    try:
        yield finished
        body_failed = False
    finally:
        await serving.stop_from_trio(finished)
        if serving.failure is not None and finished.is_set():
            if body_failed:
                log.error("%s server failed", server._kind, exc_info=serving.failure)
            else:
                raise serving.failure


_STOP = object()


class _Job:
    __slots__ = ("args", "done", "error", "fn", "result", "token")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.token = trio.lowlevel.current_trio_token()
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class EnvWorkers:
    """A FIFO of blocking env calls and ``size`` daemon threads that run them; with
    ``size=0`` another thread runs them (:meth:`work_here` until :meth:`stop`: the one
    that called a blocking ``serve()``, for envs tied to the thread that made them).

    Jobs start in submission order, which the env host's scheduler relies on (an
    earlier request always gets a thread before a later one that waits for it).
    A finished job wakes its waiter through the server's Trio token.
    """

    def __init__(self, size: int) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self.work_here, name=f"rlmesh-trio-env-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> _Job:
        """Queue ``fn(*args)`` now (jobs start in the order submitted); await
        :meth:`result` for its outcome. Call from the server's Trio run.

        Raises:
            RuntimeError: the pool is stopped.
        """
        if self._stopped:
            raise RuntimeError("the env worker pool is stopped")
        job = _Job(fn, args)
        self._jobs.put(job)
        return job

    @staticmethod
    async def result(job: _Job) -> Any:
        """Wait for a submitted job.

        Cancellation: the wait is cancellable; the call itself cannot be stopped
        (an env call cannot be interrupted) and its result is then dropped.

        Raises:
            Whatever the job raised.
        """
        await job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """:meth:`submit`, then :meth:`result`.

        Raises:
            RuntimeError: the pool is stopped.
            Whatever ``fn`` raised.
        """
        return await self.result(self.submit(fn, *args))  # type: ignore[no-any-return]

    def stop(self) -> None:
        """Let idle threads exit; a thread inside a slow env call exits when it returns."""
        if self._stopped:
            return
        self._stopped = True
        for _ in range(max(1, len(self._threads))):  # size 0: one for work_here's caller
            self._jobs.put(_STOP)

    def work_here(self) -> None:
        """Run jobs on the calling thread until :meth:`stop`, the jobs queued before it too."""
        while (job := self._jobs.get()) is not _STOP:
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:
                job.error = exc
            with contextlib.suppress(trio.RunFinishedError):  # nobody waits any more
                job.token.run_sync_soon(job.done.set)
