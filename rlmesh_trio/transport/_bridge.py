"""The one place where asyncio meets Trio.

grpclib is asyncio-only. We host its coroutines on a trio-asyncio loop that
runs inside the caller's Trio run, so a caller in plain ``trio.run`` never
opens an asyncio loop by hand. Nothing else in the package imports asyncio
or trio_asyncio.

Cancellation crosses the bridge both ways: cancelling the Trio scope around
:func:`call` cancels the asyncio task behind it, and an asyncio-side
cancellation surfaces in Trio as ``trio.Cancelled`` handling in the caller's
scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

import trio_asyncio

__all__ = ["AsyncioEvent", "asyncio_loop", "call", "in_loop", "spawn_asyncio"]

P = ParamSpec("P")
T = TypeVar("T")

AsyncioEvent = asyncio.Event


def in_loop() -> bool:
    """True when the current Trio task can already reach an asyncio loop."""
    try:
        return trio_asyncio.current_loop.get() is not None
    except LookupError:
        return False


@asynccontextmanager
async def asyncio_loop() -> AsyncIterator[None]:
    """Ensure an asyncio loop is running for the body; reuse the caller's if there is one.

    Cancellation: leaving the block closes a loop we opened, cancelling any
    asyncio task still running on it.
    """
    if in_loop():
        yield
        return
    async with trio_asyncio.open_loop():
        yield


async def call(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Await an asyncio coroutine function from Trio (one bridge hop)."""
    return await trio_asyncio.aio_as_trio(fn)(*args, **kwargs)  # type: ignore[no-any-return]


def spawn_asyncio(coro: Awaitable[Any]) -> asyncio.Task[Any]:
    """Start an asyncio task on the current loop (call from asyncio-side code only)."""
    return asyncio.ensure_future(coro)
