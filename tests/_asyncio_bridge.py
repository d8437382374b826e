"""A test helper: drive grpclib peers (clients, servers) from Trio tests.

The package needs no asyncio bridge (its clients and servers run on Trio, over
its own wire core). Tests that talk to our servers through
grpclib's own client, as a third-party peer would, run those coroutines here:
on one plain asyncio loop in a background thread of the test process, so a
grpclib channel opened in one call can be used in the next.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

import trio

__all__ = ["asyncio_loop", "call", "on_loop"]

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """The one asyncio loop of the test process, started on first use (a daemon thread)."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="test-asyncio", daemon=True).start()
            _loop = loop
        return _loop


@asynccontextmanager
async def asyncio_loop() -> AsyncIterator[None]:
    """Kept for the tests' ``async with`` blocks: the background loop is always there."""
    _background_loop()
    yield


async def call(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Await the asyncio coroutine ``fn(*args, **kwargs)`` from Trio.

    Cancellation: cancelling the caller cancels the asyncio task and raises
    ``trio.Cancelled`` here.
    """

    async def run() -> T:
        return await fn(*args, **kwargs)

    future = asyncio.run_coroutine_threadsafe(run(), _background_loop())
    done = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def wake(_: concurrent.futures.Future[T]) -> None:
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass

    future.add_done_callback(wake)
    try:
        await done.wait()
    except trio.Cancelled:
        future.cancel()
        raise
    return future.result()


async def on_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call the plain function ``fn`` on the background loop's thread (a grpclib ``Server``
    must be made there: it binds the loop it is made on)."""

    async def run() -> T:
        return fn(*args, **kwargs)

    return await call(run)
