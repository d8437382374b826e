"""Who reads a connection's socket: the task waiting for a reply, or the background reader.

A route waiting for its own reply reads the socket itself (wait until
readable, read, feed the core, dispatch): the reply then reaches it with no
hand-off from another task, which saves a trip through Trio's scheduler per
reply. Only one task reads at a time. Others waiting on the same connection
park on their own event and are woken by whoever reads (their reply was
dispatched to them) or handed the read role when the reader leaves.

The background reader covers everything else: replies nobody waits for in a
task (``submit`` callbacks, unary calls), pings, GOAWAY and EOF on an idle
connection. It takes the socket only after :data:`IDLE` seconds without a
foreground reader (or at once when such replies are owed), and gives it up
(its wait is cancelled) the moment a waiting task wants to read.

Plain TCP and unix sockets only (a TLS stream is read by its own task).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

import trio

__all__ = ["IDLE", "RECEIVE_SIZE", "ReplyWait", "SharedReader"]

#: Seconds without a foreground reader before the background reader takes the socket.
IDLE = 0.05
RECEIVE_SIZE = 256 * 1024


class ReplyWait(Protocol):
    """A waiter's handle: ``done`` once answered; ``event`` (made when it parks) wakes it."""

    event: trio.Event | None

    @property
    def done(self) -> bool: ...


class SharedReader:
    """The read role of one plain socket (descriptor ``fd``).

    ``process`` handles bytes read (it may resolve waiters); ``lose`` records
    a lost connection (and fails every waiter); ``lost`` says whether it is;
    ``owed`` says whether replies are owed that no task is reading for.
    """

    def __init__(
        self,
        fd: int,
        *,
        process: Callable[[bytes], None],
        lose: Callable[[str], None],
        lost: Callable[[], bool],
        owed: Callable[[], bool],
    ) -> None:
        self._fd = fd
        self._process = process
        self._lose = lose
        self._lost = lost
        self._owed = owed
        self._reader: str | None = None  # "fg", "bg", "baton" (handed over) or None
        self._baton: ReplyWait | None = None
        self._bg_scope: trio.CancelScope | None = None
        self._parked: list[ReplyWait] = []
        self._bg_wake = trio.Event()
        self._fg_last = 0.0

    def _read_once_ready(self) -> bool:
        """Read what is there and process it; ``False`` when the connection is gone."""
        try:
            data = os.read(self._fd, RECEIVE_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            self._lose("connection closed")
            return False
        self._process(data)
        return not self._lost()

    async def wait_reply(self, waiter: ReplyWait) -> None:
        """Return once ``waiter`` is done (answered, or failed by a lost connection).

        Cancellation: leaves at once; the read role passes to another waiter.
        """
        try:
            while not waiter.done and not self._lost():
                if self._reader is None or self._baton is waiter:
                    self._baton = None
                    # Read for ourselves (inline, not in a helper coroutine: once per reply).
                    self._reader = "fg"
                    try:
                        while not waiter.done:
                            try:
                                await trio.lowlevel.wait_readable(self._fd)
                            except (trio.ClosedResourceError, OSError):
                                self._lose("connection closed")
                                return
                            if not self._read_once_ready():
                                return
                    finally:
                        self._reader = None
                        self._fg_last = trio.current_time()
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
        if self._owed():
            self._bg_wake.set()

    def wake_background(self) -> None:
        """Replies are owed that no task reads for (a ``submit``): read them now."""
        if self._reader is None and not self._parked:
            self._bg_wake.set()

    async def background(self) -> None:
        """The background reader's loop; returns when the connection is lost."""
        while not self._lost():
            idle_for = trio.current_time() - self._fg_last
            if self._reader is not None or self._parked or (idle_for < IDLE and not self._owed()):
                self._bg_wake = trio.Event()
                with trio.move_on_after(max(IDLE - idle_for, 0.0) or IDLE):
                    await self._bg_wake.wait()
                continue
            self._reader = "bg"
            with trio.CancelScope() as scope:
                self._bg_scope = scope
                try:
                    await trio.lowlevel.wait_readable(self._fd)
                except (trio.ClosedResourceError, OSError):
                    self._lose("connection closed")
                    return
            self._bg_scope = None
            self._reader = None
            if not scope.cancelled_caught and not self._read_once_ready():
                return
            self._hand_over()
