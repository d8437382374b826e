"""The servers' plain asyncio loop: the one module that imports asyncio (public API only).

grpclib is asyncio code, so each server runs a plain asyncio loop on a thread
of its own (never trio-asyncio, never the caller's Trio thread), using asyncio
only through the names here. A policy that needs Trio (an async policy, a
worker thread) runs in a Trio *guest run* hosted by that same loop
(:func:`trio_guest`), Trio's public way to share a thread with asyncio.
Nothing here runs at import.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

__all__ = [
    "AsyncioCancelledError",
    "AsyncioEvent",
    "AsyncioFuture",
    "AsyncioLock",
    "AsyncioLoop",
    "AsyncioSemaphore",
    "AsyncioTask",
    "TrioGuest",
    "asyncio_shield",
    "asyncio_sleep",
    "asyncio_wait",
    "asyncio_wait_for",
    "run_plain_asyncio",
    "running_loop",
    "spawn",
    "trio_guest",
]

T = TypeVar("T")

AsyncioCancelledError = asyncio.CancelledError
AsyncioEvent = asyncio.Event
AsyncioFuture = asyncio.Future
AsyncioLock = asyncio.Lock
AsyncioLoop = asyncio.AbstractEventLoop
AsyncioSemaphore = asyncio.Semaphore
AsyncioTask = asyncio.Task
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


def running_loop() -> asyncio.AbstractEventLoop:
    """The asyncio loop of the calling coroutine or callback.

    Raises:
        RuntimeError: outside a running asyncio loop.
    """
    return asyncio.get_running_loop()


def spawn(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``coro`` as a task of the running loop (asyncio side only)."""
    return asyncio.get_running_loop().create_task(coro)


class TrioGuest:
    """A Trio guest run on the running asyncio loop; asyncio side code hands it calls."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, token: trio.lowlevel.TrioToken, nursery: Any
    ) -> None:
        self._loop = loop
        self.token = token
        self.nursery: trio.Nursery = nursery

    async def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Asyncio side: run ``await afn(*args)`` as a task of the guest; its result.

        Cancellation: cancelling the caller cancels the guest's task too.

        Raises:
            Whatever ``afn`` raised.
        """
        future: asyncio.Future[T] = self._loop.create_future()
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
            guest = TrioGuest(loop, trio.lowlevel.current_trio_token(), nursery)
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
