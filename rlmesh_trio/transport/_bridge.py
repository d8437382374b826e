"""The one place where asyncio meets Trio.

grpclib is asyncio-only. We host its coroutines on a trio-asyncio loop that
runs inside the caller's Trio run, so a caller in plain ``trio.run`` never
opens an asyncio loop by hand. Nothing else in the package imports asyncio
or trio_asyncio; asyncio-side code elsewhere in ``transport`` uses the
primitives re-exported here.

Two ways across:

* :func:`call` awaits an asyncio coroutine function from Trio (one bridge
  hop, about 35 µs on the reference machine). Cancelling the Trio scope
  around it cancels the asyncio task behind it, and an asyncio-side
  cancellation surfaces in Trio as ``trio.Cancelled`` handling in the
  caller's scope. Used for rare operations (connect, handshake, shutdown).
* :func:`post` + :class:`Slot` for the hot path: Trio hands work to an
  asyncio task without waiting (``post`` or an :class:`AsyncioQueue`
  ``put_nowait``) and waits on a :class:`Slot` the asyncio side resolves.
  Both sides run on the same thread (the asyncio loop is itself a Trio
  task), so resolving a Trio event from an asyncio callback is safe. This
  costs about 20 µs per round and keeps asyncio task creation off the
  per-request path.

:func:`read_without_sync` trims the receive side of a client connection:
trio-asyncio runs each socket reader in a Trio task that, after every read,
waits for one full pass of the asyncio loop (``synchronize``); for a
connection whose responses are delivered from the read callback itself
that pass is pure overhead (two task switches and a loop iteration per
response).
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import logging
import socket
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, ParamSpec, TypeVar

import trio
import trio_asyncio

__all__ = [
    "AsyncioCancelledError",
    "AsyncioEvent",
    "AsyncioFuture",
    "AsyncioLock",
    "AsyncioQueue",
    "AsyncioSemaphore",
    "AsyncioTask",
    "Slot",
    "asyncio_loop",
    "asyncio_shield",
    "asyncio_sleep",
    "asyncio_wait",
    "asyncio_wait_for",
    "awaiting_replies",
    "call",
    "in_loop",
    "post",
    "read_without_sync",
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
running_loop = asyncio.get_running_loop


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


def in_loop() -> bool:
    """True when the current Trio task can already reach an asyncio loop."""
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
    """Raise a clear error when transport code runs without a trio-asyncio loop."""
    if not in_loop():
        raise RuntimeError(
            f"{what} needs the transport's asyncio loop: run it inside "
            "`async with rlmesh_trio.transport.asyncio_loop():` (run_routes does this for you)"
        )


async def call(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Await an asyncio coroutine function from Trio (one bridge hop).

    Cancellation: cancelling the caller's scope cancels the asyncio task and
    raises ``trio.Cancelled`` here.
    """
    return await trio_asyncio.aio_as_trio(fn)(*args, **kwargs)  # type: ignore[no-any-return]


def post(fn: Callable[..., Any], *args: Any) -> None:
    """Schedule a plain callable on the asyncio loop from Trio, without waiting for it.

    Safe to call from a cancelled Trio scope (it never blocks). A no-op when
    no loop is running any more (the loop's close already tore everything down).
    """
    try:
        loop = trio_asyncio.current_loop.get()
    except LookupError:
        return
    if loop is None or loop.is_closed():
        return
    loop.call_soon(fn, *args)


def spawn_asyncio(coro: Awaitable[Any]) -> asyncio.Task[Any]:
    """Start an asyncio task on the current loop (call from asyncio-side code only)."""
    return asyncio.ensure_future(coro)


def read_without_sync(fd: int) -> bool:
    """Serve the asyncio reader registered for ``fd`` from a Trio task that never synchronizes.

    trio-asyncio's reader task calls the reader callback (e.g. a socket
    transport's ``_read_ready``) each time ``fd`` is readable and then waits
    for the asyncio loop to run everything queued so far. This swaps it for a
    task that only calls the callback, exactly like trio-asyncio's otherwise:
    same handle type, registered the same way in the loop's selector, so the
    transport's own ``remove_reader`` (on close or pause) cancels it as usual.
    Call from code running on the asyncio side of the bridge or in a Trio
    task inside :func:`asyncio_loop`, right after the connection is made.

    It still waits for the asyncio loop after a read that queued asyncio
    callbacks, so a reply read through grpclib's own buffer is handed over
    before a later read (an EOF, say) is processed, as before.

    Reaches into trio-asyncio internals (``_selector``, ``_set_read_handle``,
    ``_nursery``, ``_q_send``, ``ScopedHandle``); returns ``False`` and changes
    nothing when they are not as expected.
    """
    try:
        from trio_asyncio._handles import ScopedHandle

        loop: Any = trio_asyncio.current_loop.get()
        key = loop._selector.get_key(fd)
        old = key.data[0]
        if old is None or old._cancelled or not isinstance(old, ScopedHandle):
            return False
        handle = ScopedHandle(old._callback, old._args, loop)
        nursery = loop._nursery
        if nursery is None or not callable(loop._q_send.statistics):
            return False
        loop._set_read_handle(fd, handle)
    except Exception:
        log.debug("keeping trio-asyncio's reader for fd %s", fd, exc_info=True)
        return False
    old.cancel()
    nursery.start_soon(_read_loop, loop, fd, handle)
    return True


async def _read_loop(loop: Any, fd: int, handle: Any) -> None:
    # trio-asyncio's reader loop, except that it synchronizes only when the read
    # queued asyncio callbacks (e.g. woke a task waiting in grpclib's own buffer):
    # those still run before the next read (a reply is seen before a later EOF),
    # while a read whose responses were delivered directly costs no loop pass.
    # The loop's call queue is a Trio memory channel; its buffer is read directly
    # when it is the expected deque (statistics() builds an object per call).
    buffer = getattr(getattr(loop._q_send, "_state", None), "data", None)
    if not isinstance(buffer, deque):
        buffer = None
    queued = loop._q_send.statistics
    read = _direct_reader(handle)
    with handle._scope:
        try:
            while not handle._cancelled:
                await trio.lowlevel.wait_readable(fd)
                if handle._cancelled:
                    break
                if read is None or not read():
                    handle._run()
                if buffer if buffer is not None else queued().current_buffer_used:
                    await loop.synchronize()
        except Exception as exc:
            handle._raise(exc)


#: Reads at the start of a connection that are always acknowledged at once (see below).
EAGER_ACK_READS = 16

_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)

# transport -> callables saying whether replies are still owed on that connection
_AWAITING: weakref.WeakKeyDictionary[Any, list[Callable[[], bool]]] = weakref.WeakKeyDictionary()


def _acknowledge_now(sock: socket.socket, option: int) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, option, 1)


def awaiting_replies(transport: Any) -> list[Callable[[], bool]]:
    """The registry of "replies still owed?" checks for ``transport``'s connection.

    A Join session adds a check while its stream is open (and removes it
    after), so the reader knows when a read left requests unanswered.
    """
    checks = _AWAITING.get(transport)
    if checks is None:
        checks = _AWAITING[transport] = []
    return checks


def _direct_reader(handle: Any) -> Callable[[], bool] | None:
    """A plain socket transport's read, minus the layers between the reader and the protocol.

    For a ``_SelectorSocketTransport`` feeding a plain (not buffered)
    protocol, each readable event goes through the handle, the transport's
    read dispatcher and its data path before reaching
    ``protocol.data_received`` -- a few microseconds per read on a route's
    hot path. The returned function does the data path's common case itself
    (one ``recv``, then ``data_received`` in the handle's context) and
    returns ``False`` without reading when the connection is being lost, so
    the transport's own code handles that; a read error, EOF or a failing
    protocol go to the transport's own handlers, as there. ``None`` when the
    handle is not such a transport's reader.

    It also acknowledges at once (``TCP_QUICKACK``, Linux) a read after
    which replies are still owed on the connection, and every read of a
    connection's first :data:`EAGER_ACK_READS`. A server that does not
    disable Nagle's algorithm (rlmesh 0.1.0's do not) holds back a write
    while its previous one is unacknowledged -- a flow-control update just
    before a reply, one route's reply behind another's, a unary response's
    DATA behind its HEADERS -- and a delayed ACK then costs 40 ms. A read
    that answers everything outstanding (the steady state) pays no extra
    system call.
    """
    try:
        transport = handle._callback.__self__
        plain: Any = getattr(asyncio.selector_events, "_SelectorSocketTransport", None)
        if plain is None or type(transport) is not plain:
            return None
        if transport._read_ready_cb != transport._read_ready__data_received:
            return None
        sock, max_size, run = transport._sock, transport.max_size, handle._context.run
        _ = (transport._conn_lost, transport._fatal_error, transport._read_ready__on_eof)
        quickack = _TCP_QUICKACK if sock.family in (socket.AF_INET, socket.AF_INET6) else None
    except Exception:
        log.debug("no direct reader for %r", handle, exc_info=True)
        return None
    recv, ack = sock.recv, _acknowledge_now
    awaiting = awaiting_replies(transport)
    eager = EAGER_ACK_READS

    def read() -> bool:
        nonlocal eager, quickack
        if transport._conn_lost:
            return False
        try:
            data = recv(max_size)
        except (BlockingIOError, InterruptedError):
            return True
        except Exception as exc:
            transport._fatal_error(exc, "Fatal read error on socket transport")
            return True
        if not data:
            run(transport._read_ready__on_eof)
            return True
        try:
            run(transport._protocol.data_received, data)
        except Exception as exc:
            transport._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")
            return True
        if quickack is not None:
            if eager:
                eager -= 1
                owed = True
            else:
                owed = False
                for check in awaiting:
                    if check():
                        owed = True
                        break
            if owed:
                try:
                    ack(sock, quickack)
                except OSError:
                    quickack = None
        return True

    return read


class Slot(Generic[T]):
    """A one-shot result that the asyncio side fills and a Trio task awaits.

    ``resolve``/``fail`` may be called from either side (they never block);
    the first call wins. ``wait`` is Trio-side. Cancellation: cancelling
    ``wait`` leaves the slot unresolved; the owner decides what a cancelled
    wait means (abandon the request, or tear the stream down).
    """

    __slots__ = ("_error", "_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def resolve(self, value: T) -> None:
        if not self._event.is_set():
            self._value = value
            self._event.set()

    def fail(self, error: BaseException) -> None:
        if not self._event.is_set():
            self._error = error
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
