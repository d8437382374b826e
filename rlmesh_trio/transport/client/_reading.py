"""Who reads a connection's socket: the task waiting for a reply, or the background reader.

A route waiting for its own reply reads the socket itself: the reply then
reaches it with no hand-off from another task, one trip through Trio's
scheduler less per reply. One task reads at a time; others waiting on the same
connection park and are woken by their reply or handed the read role.

The background reader covers the rest (``submit`` callbacks, unary calls,
pings, GOAWAY, EOF on an idle connection). It takes the socket after
:data:`IDLE` seconds (at most twice that) without a foreground reader, or at
once when such replies are owed, and gives it up (its wait is cancelled) the
moment a waiting task wants to read. It reads through the byte-stream seam
(:mod:`.._stream`): a plain socket's descriptor directly, a TLS or in-memory
stream through its buffer (whose receive is safe to cancel once the TLS
handshake is done, which :func:`._conn._open_stream` waits for).
"""

from __future__ import annotations

from typing import Protocol

import trio

from .._stream import ByteStream

__all__ = ["CLOSED", "IDLE", "ReaderOwner", "ReplyWait", "SharedReader"]

CLOSED = "connection closed"
#: Seconds without a foreground reader before the background reader takes the socket.
IDLE = 0.05


class ReplyWait(Protocol):
    """A waiter's handle: ``done`` once answered; ``event`` (made when it parks) wakes it."""

    event: trio.Event | None

    @property
    def done(self) -> bool: ...


class ReaderOwner(Protocol):
    """The connection whose socket is read: it takes the bytes and knows what is owed."""

    #: Why the connection is gone (``None`` while it is up).
    lost: str | None

    def process(self, data: bytes) -> None:
        """Feed received bytes to the connection's core and hand out what they finish."""
        ...

    def lose(self, detail: str) -> None:
        """Mark the connection gone (once) and fail everything waiting on it."""
        ...

    def replies_owed(self) -> bool:
        """Whether replies are due that no task is waiting to read for itself."""
        ...


class SharedReader:
    """The read role of the byte stream ``stream`` of the connection ``owner``."""

    def __init__(self, stream: ByteStream, owner: ReaderOwner) -> None:
        self._receive_now = stream.receive_now
        self._wait_receivable = stream.wait_receivable
        self._owner = owner
        self._reader: str | None = None  # "fg", "bg", "baton" (handed over) or None
        self._baton: ReplyWait | None = None
        self._bg_scope: trio.CancelScope | None = None
        self._parked: list[ReplyWait] = []
        self._bg_wake = trio.Event()
        # Set by each foreground read, cleared by the background reader before it
        # idles: a clock read per reply would cost more than this flag.
        self._fg_recent = False

    def _read_once_ready(self) -> bool:
        """Read what is there and process it; ``False`` when the connection is gone."""
        try:
            data = self._receive_now()
        except BlockingIOError:
            return True
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._owner.lose(CLOSED)
            return False
        owner = self._owner
        owner.process(data)
        return owner.lost is None

    async def wait_reply(self, waiter: ReplyWait) -> None:
        """Return once ``waiter`` is done (answered, or failed by a lost connection).

        Cancellation: leaves at once; the read role passes to another waiter.
        """
        owner = self._owner
        try:
            while not waiter.done and owner.lost is None:
                if self._reader is None or self._baton is waiter:
                    self._baton = None
                    # Read for ourselves (inline, not in a helper coroutine: once per reply).
                    self._reader = "fg"
                    try:
                        while not waiter.done:
                            try:
                                await self._wait_receivable()
                            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                                owner.lose(CLOSED)
                                return
                            if not self._read_once_ready():
                                return
                    finally:
                        self._reader = None
                        self._fg_recent = True
                        self._hand_over()
                    return
                await self._park(waiter)
        finally:
            if self._baton is waiter:  # handed the role but leaving: pass it on
                self._baton = None
                self._reader = None
                self._hand_over()

    async def _park(self, waiter: ReplyWait) -> None:
        """Wait to be woken: by our answer, or by being handed the read role."""
        if self._reader == "bg" and self._bg_scope is not None:
            # The background reader leaves the socket and hands it to a parked
            # waiter (it may have been woken by data already: it reads that first).
            self._bg_scope.cancel()
            self._bg_scope = None
        event = waiter.event = trio.Event()
        self._parked.append(waiter)
        try:
            await event.wait()
        finally:
            if waiter in self._parked:
                self._parked.remove(waiter)

    def _hand_over(self) -> None:
        """Give the read role to a parked waiter still unanswered (else maybe to the
        background reader). Answered waiters were woken by their answer already."""
        while self._parked:
            waiter = self._parked.pop(0)
            if not waiter.done and waiter.event is not None:
                self._reader = "baton"  # reserved for that waiter until it runs
                self._baton = waiter
                waiter.event.set()
                return
        if self._owner.replies_owed():
            self._bg_wake.set()

    def wake_background(self) -> None:
        """Replies are owed that no task reads for (a ``submit``): read them now."""
        if self._reader is None and not self._parked:
            self._bg_wake.set()

    async def background(self) -> None:
        """The background reader's loop; returns when the connection is lost."""
        owner = self._owner
        while owner.lost is None:
            busy = self._reader is not None or self._parked
            if busy or (self._fg_recent and not owner.replies_owed()):
                # Wait while a foreground reader is (or was lately) about.
                self._fg_recent = False
                self._bg_wake = trio.Event()
                with trio.move_on_after(IDLE):
                    await self._bg_wake.wait()
                continue
            self._reader = "bg"
            with trio.CancelScope() as scope:
                self._bg_scope = scope
                try:
                    await self._wait_receivable()
                except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                    owner.lose(CLOSED)
                    return
            self._bg_scope = None
            self._reader = None
            if not scope.cancelled_caught and not self._read_once_ready():
                return
            self._hand_over()
