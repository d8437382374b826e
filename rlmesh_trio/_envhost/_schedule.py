"""Ordering of Join requests across worker threads.

A lane endpoint processes different lanes concurrently, but two requests that
touch the same lane (or any whole-width request) must run one after the other,
in arrival order. Transports admit requests on their event loop in arrival
order (cheap, never blocks) and then run each in a worker thread; the thread
waits here until every earlier conflicting request has finished.

Earlier tickets are always handed to the thread pool first, so a waiting
thread never blocks a ticket it depends on: no deadlock even with a small pool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

__all__ = ["Scheduler", "Ticket"]


class Ticket:
    """One admitted request's place in line. ``lanes=None`` means it needs the whole endpoint."""

    __slots__ = ("admitted_ns", "discarded", "lanes", "request", "started")

    def __init__(self, request: object, lanes: frozenset[int] | None, admitted_ns: int) -> None:
        self.request = request
        self.lanes = lanes
        self.admitted_ns = admitted_ns
        self.started = False
        self.discarded = False

    def conflicts(self, other: Ticket) -> bool:
        if self.lanes is None or other.lanes is None:
            return True
        return not self.lanes.isdisjoint(other.lanes)


class Scheduler:
    """Per-lane FIFO ordering with whole-endpoint barriers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[Ticket] = []

    def admit(self, request: object, lanes: Iterable[int] | None, admitted_ns: int) -> Ticket:
        ticket = Ticket(request, None if lanes is None else frozenset(lanes), admitted_ns)
        with self._cond:
            self._pending.append(ticket)
        return ticket

    def wait_turn(self, ticket: Ticket) -> bool:
        """Block the calling thread until no earlier conflicting ticket is pending.

        Returns False (at once) for a discarded ticket, which must not run.
        """
        with self._cond:
            if ticket.discarded:
                return False
            ticket.started = True
            self._cond.wait_for(lambda: self._ready(ticket))
            return True

    def ready_now(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` could run at once (no earlier conflicting ticket pending);
        never blocks, so an event loop may ask before running a request inline."""
        with self._cond:
            return not ticket.discarded and self._ready(ticket)

    def _ready(self, ticket: Ticket) -> bool:
        for other in self._pending:
            if other is ticket:
                return True
            if other.conflicts(ticket):
                return False
        return True  # already discarded: nothing to wait for

    def finish(self, ticket: Ticket) -> None:
        with self._cond:
            if ticket in self._pending:
                self._pending.remove(ticket)
            self._cond.notify_all()

    def discard(self, ticket: Ticket) -> None:
        """Drop a ticket that will never run. A ticket already running finishes on its own."""
        with self._cond:
            if not ticket.started and not ticket.discarded:
                ticket.discarded = True
                self._pending.remove(ticket)
                self._cond.notify_all()

    def idle(self) -> bool:
        """Whether no admitted ticket is pending.

        Read without the lock (one list's truth test is atomic under the GIL):
        the caller is the thread that admits, so nothing can be added meanwhile,
        and a ticket a worker finishes just now only makes the answer a stale
        False, after which the caller takes the ticketed path.
        """
        return not self._pending
