"""A test helper: grpclib clients and servers hosted inside a Trio test run (trio-asyncio).

The package itself needs no asyncio bridge any more (its clients are Trio-native
and its servers run plain asyncio loops of their own); tests still drive grpclib as
a third-party peer through this module (trio-asyncio is a dev dependency).


grpclib is asyncio-only. The servers host its coroutines either on a plain
asyncio loop in a thread (:func:`run_plain_asyncio`) or, for ``serve_env`` /
``serve_model`` inside a Trio run, on a trio-asyncio loop (:func:`asyncio_loop`).
trio-asyncio is imported only when such a loop is opened: importing
``rlmesh_trio`` leaves asyncio's event loop policy alone. The clients are
Trio-native (``transport/_conn.py``) and never come here.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

import trio

__all__ = [
    "AsyncioCancelledError",
    "AsyncioEvent",
    "AsyncioFuture",
    "AsyncioLock",
    "AsyncioQueue",
    "AsyncioSemaphore",
    "AsyncioTask",
    "asyncio_loop",
    "asyncio_shield",
    "asyncio_sleep",
    "asyncio_wait",
    "asyncio_wait_for",
    "call",
    "in_loop",
    "run_plain_asyncio",
    "running_loop",
    "spawn_asyncio",
]

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

AsyncioEvent = asyncio.Event
AsyncioQueue = asyncio.Queue
AsyncioTask = asyncio.Task
AsyncioCancelledError = asyncio.CancelledError
# Asyncio-side primitives for transport code that runs on the loop (server handlers).
AsyncioFuture = asyncio.Future
AsyncioLock = asyncio.Lock
AsyncioSemaphore = asyncio.Semaphore
asyncio_shield = asyncio.shield
asyncio_sleep = asyncio.sleep
asyncio_wait = asyncio.wait
asyncio_wait_for = asyncio.wait_for


def running_loop() -> asyncio.AbstractEventLoop:
    """The running asyncio loop (looked up per call: trio-asyncio, imported lazily,
    replaces ``asyncio.get_running_loop`` when it loads)."""
    return asyncio.get_running_loop()


def run_plain_asyncio(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` to completion on a new plain asyncio loop, without Trio (blocking).

    For blocking servers whose requests never need Trio: trio-asyncio's
    scheduling costs tens of microseconds per request.
    """
    loop = asyncio.SelectorEventLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _trio_asyncio() -> Any:
    # Imported on first use: importing trio_asyncio installs its own event loop policy.
    import trio_asyncio

    return trio_asyncio


def in_loop() -> bool:
    """True when the current Trio task can already reach a trio-asyncio loop."""
    if "trio_asyncio" not in sys.modules:
        return False
    trio_asyncio = _trio_asyncio()
    try:
        return trio_asyncio.current_loop.get() is not None
    except LookupError:
        return False


class _LoopUse:
    """Tasks borrowing a loop they did not open (see :func:`asyncio_loop`)."""

    __slots__ = ("count", "idle")

    def __init__(self) -> None:
        self.count = 0
        self.idle = trio.Event()
        self.idle.set()

    def enter(self) -> None:
        if self.count == 0:
            self.idle = trio.Event()
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.idle.set()


_USES: dict[int, _LoopUse] = {}

#: How long a loop's owner waits, on leaving, for borrowers in other tasks.
BORROWER_GRACE = 10.0


@asynccontextmanager
async def asyncio_loop() -> AsyncIterator[None]:
    """Ensure an asyncio loop is running for the body; reuse the caller's if there is one.

    A reused loop may belong to a *sibling* task that shares this context (as
    pytest-trio fixtures do), so borrowers are counted and the owner, on
    leaving, waits (shielded, at most ``BORROWER_GRACE`` seconds) until no
    other task is still using its loop.

    Cancellation: leaving the block closes a loop we opened, cancelling any
    asyncio task still running on it.
    """
    trio_asyncio = _trio_asyncio()
    if in_loop():
        use = _USES.get(id(trio_asyncio.current_loop.get()))
        if use is not None:
            use.enter()
        try:
            yield
        finally:
            if use is not None:
                use.leave()
        return
    # trio-asyncio runs the block inside a shielded nursery and forwards an outer
    # cancellation into it from a helper task, which may not have run by the time
    # the block starts: a caller that is already cancelled must not get in at all.
    await trio.lowlevel.checkpoint_if_cancelled()
    body_error: BaseException | None = None
    try:
        async with trio_asyncio.open_loop() as loop:
            use = _USES[id(loop)] = _LoopUse()
            try:
                yield
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(BORROWER_GRACE):
                    await use.idle.wait()
                _USES.pop(id(loop), None)
    except BaseExceptionGroup as group:
        # trio-asyncio's internal nurseries wrap whatever the body raised in
        # exception groups; give the caller back the body's own exception.
        if body_error is not None and _only_leaf(group, body_error):
            raise body_error from None
        raise


def _only_leaf(group: BaseExceptionGroup[BaseException], leaf: BaseException) -> bool:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            if not _only_leaf(exc, leaf):
                return False
        elif exc is not leaf:
            return False
    return True


def require_loop(what: str) -> None:
    """Raise a clear error when server code needs a trio-asyncio loop and has none."""
    if not in_loop():
        raise RuntimeError(
            f"{what} needs the transport's asyncio loop: run it inside "
            "`async with rlmesh_trio.transport.asyncio_loop():`"
        )


async def call(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Await an asyncio coroutine function from Trio (one bridge hop).

    Cancellation: cancelling the caller's scope cancels the asyncio task and
    raises ``trio.Cancelled`` here.
    """
    return await _trio_asyncio().aio_as_trio(fn)(*args, **kwargs)  # type: ignore[no-any-return]


def spawn_asyncio(coro: Awaitable[Any]) -> asyncio.Task[Any]:
    """Start an asyncio task on the current loop (call from asyncio-side code only)."""
    return asyncio.ensure_future(coro)
