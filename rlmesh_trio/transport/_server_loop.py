"""Where server code runs; the one module that imports asyncio (public API only).

grpclib is asyncio code, so each server runs a plain asyncio loop on a
:class:`ServingThread` of its own (never trio-asyncio, never the caller's Trio thread),
so its requests never wait for the caller's Trio thread (only for the GIL). A policy
that needs Trio runs in a Trio *guest run* on the same loop, Trio's public way to
share a thread with asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import trio

if TYPE_CHECKING:
    from ._server_base import ServerBase

__all__ = [
    "AsyncioCancelledError",
    "AsyncioEvent",
    "AsyncioLock",
    "AsyncioLoop",
    "AsyncioSemaphore",
    "AsyncioTask",
    "EnvWorkers",
    "ServingThread",
    "TrioGuest",
    "asyncio_shield",
    "asyncio_sleep",
    "asyncio_wait",
    "asyncio_wait_for",
    "run_plain_asyncio",
    "running_loop",
    "serving_in_thread",
    "spawn",
    "trio_guest",
]

T = TypeVar("T")

log = logging.getLogger("rlmesh_trio.transport.server")

AsyncioCancelledError = asyncio.CancelledError
AsyncioEvent = asyncio.Event
AsyncioLock = asyncio.Lock
AsyncioLoop = asyncio.AbstractEventLoop
AsyncioSemaphore = asyncio.Semaphore
AsyncioTask = asyncio.Task
running_loop = asyncio.get_running_loop
spawn = asyncio.create_task
asyncio_shield = asyncio.shield
asyncio_sleep = asyncio.sleep
asyncio_wait = asyncio.wait
asyncio_wait_for = asyncio.wait_for


def run_plain_asyncio(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` on a fresh ``SelectorEventLoop`` of the calling thread (whatever
    loop policy the process has installed), closed on the way out.

    Raises:
        Whatever ``main`` raises.
    """
    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        return runner.run(main())


class TrioGuest:
    """A Trio guest run on the running asyncio loop; asyncio side code hands it calls."""

    def __init__(self, token: trio.lowlevel.TrioToken, nursery: trio.Nursery) -> None:
        self.token = token
        self.nursery = nursery

    async def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Asyncio side: run ``await afn(*args)`` as a task of the guest; its result.

        Cancellation: cancelling the caller cancels the guest's task too.

        Raises:
            Whatever ``afn`` raised.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.token.run_sync_soon(self.nursery.start_soon, self._one, afn, args, future)
        return await future

    async def _one(
        self, afn: Callable[..., Awaitable[T]], args: tuple[Any, ...], future: asyncio.Future[T]
    ) -> None:
        token = self.token

        def on_done(done: asyncio.Future[T]) -> None:
            # The asyncio caller gave up: stop the call too. Done callbacks run outside
            # Trio, so the cancel goes through the token.
            if done.cancelled():
                with contextlib.suppress(trio.RunFinishedError):
                    token.run_sync_soon(scope.cancel)

        with trio.CancelScope() as scope:
            future.add_done_callback(on_done)
            try:
                result = await afn(*args)
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                return
            except BaseException:
                if not future.done():
                    future.cancel()
                raise
            if not future.done():
                future.set_result(result)


@asynccontextmanager
async def trio_guest() -> AsyncIterator[TrioGuest]:
    """A Trio guest run on the running asyncio loop for the block, yielded once it runs.

    The host loop owns signals (``host_uses_signal_set_wakeup_fd``): its
    ``add_signal_handler`` handlers replace Trio's SIGINT handler.

    Cancellation: leaving the block, even by cancellation, cancels the guest's
    tasks and waits (shielded) for the run to end: no Trio run outlives its loop.

    Raises:
        Whatever the guest run raised (after the block).
    """
    loop = asyncio.get_running_loop()
    started: asyncio.Future[TrioGuest] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()
    errors: list[BaseException] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            guest = TrioGuest(trio.lowlevel.current_trio_token(), nursery)
            loop.call_soon(started.set_result, guest)
            await trio.sleep_forever()

    def done(outcome: Any) -> None:
        if not ended.done():
            ended.set_result(None)
        try:
            outcome.unwrap()
        except BaseException as exc:  # reported after the block
            errors.append(exc)

    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=done,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        either: set[asyncio.Future[Any]] = {started, ended}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            raise errors[0] if errors else RuntimeError("the Trio guest run ended at once")
        yield started.result()
    finally:
        if started.done():
            guest = started.result()
            with contextlib.suppress(trio.RunFinishedError):  # over already
                guest.token.run_sync_soon(guest.nursery.cancel_scope.cancel)
        await asyncio.shield(ended)
    if errors:
        raise errors[0]


class ServingThread:
    """``serve(on_listening)`` on a daemon thread (``server.serve_blocking`` unless
    given), ``on_ended()`` once it is done (on that thread); :attr:`failure` is what
    the serve raised."""

    def __init__(
        self,
        server: ServerBase,
        *,
        on_listening: Callable[[], None],
        on_ended: Callable[[], None],
        serve: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.server = server
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        # How long stopping may take: the server's close bound plus a second.
        self.bound = server.close_bound() + 1.0
        self._serve = server.serve_blocking if serve is None else serve
        self._on_listening = on_listening
        self._on_ended = on_ended
        name = f"rlmesh-trio-{server.kind}-server"
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
        raise RuntimeError(f"the {self.server.kind} server stopped before it was listening")

    def left_behind(self) -> None:
        log.warning(
            "%s server %s did not stop within %ss; leaving its thread behind",
            self.server.kind,
            self.server._address,
            self.bound,
        )

    async def stop_from_trio(self, finished: trio.Event) -> None:
        """Ask the server to stop and wait for ``finished`` (the thread's end): shielded,
        bounded by :attr:`bound`."""
        self.server.stop_threadsafe()
        with trio.CancelScope(shield=True), trio.move_on_after(self.bound):
            await finished.wait()
        if not finished.is_set():
            self.left_behind()


@asynccontextmanager
async def serving_in_thread(server: ServerBase) -> AsyncIterator[trio.Event]:
    """Run ``server.serve_blocking`` on a dedicated thread for the ``async with`` block;
    yields, once listening, an event set when the server stops by itself (an
    accepted remote Shutdown; the block's body keeps running).

    Cancellation: leaving the block (however, even while starting) asks the
    server to stop and waits for its thread, shielded and bounded by the
    server's close bound plus a second: a thread stuck in user code is left
    behind (a daemon thread) with a warning.

    Raises:
        ValueError: see :meth:`ServerBase.refuse_thread`.
        OSError: the server could not listen.
        RuntimeError: the server stopped before it was listening.
        Whatever the server raised while serving or stopping, on leaving the
        block, unless the body raised first (then it is logged).
    """
    server.refuse_thread()
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
                log.error("%s server failed", server.kind, exc_info=serving.failure)
            else:
                raise serving.failure


_STOP = object()


class EnvWorkers:
    """A FIFO of blocking env calls and ``size`` daemon threads that run them; with
    ``size=0`` another thread runs them (:meth:`work_here` until :meth:`stop`: the one
    that called a blocking ``serve()``, for envs tied to the thread that made them).

    Leaner than ``loop.run_in_executor`` (a concurrent.futures future and two
    hops per call): a finished job resolves its waiter through its loop's
    ``call_soon_threadsafe``. Jobs start in submission order, which the
    env host's scheduler relies on (an earlier request always gets a thread
    before a later one that waits for it).
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

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` on a worker; the returned future resolves on the event loop.

        Asyncio side only. Cancelling the future does not stop the call (an env
        call cannot be interrupted); its result is then dropped.

        Raises:
            RuntimeError: the pool is stopped.
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
        for _ in range(max(1, len(self._threads))):  # size 0: one for work_here's caller
            self._jobs.put(_STOP)

    def work_here(self) -> None:
        """Run jobs on the calling thread until :meth:`stop`, the jobs queued before it too."""
        while (job := self._jobs.get()) is not _STOP:
            fn, args, future = job
            try:
                result, error = fn(*args), None
            except BaseException as exc:
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop is closed; nobody waits any more
                future.get_loop().call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: the caller stopped waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
