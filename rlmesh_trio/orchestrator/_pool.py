"""Env endpoints handed out as they come free, and tickets handed to routes.

An env endpoint serves one route at a time (one Join session). Routes that
name the same endpoint (the same address, or the same env object) wait for
it in route order instead of failing "endpoint is in use"; routes on
different endpoints never wait for each other here.

A :class:`TicketQueue` holds the unfinished tickets of one plan entry. A
static route owns its queue and claims everything at once. Routes of one
ticket pool (dynamic dealing) share a queue and claim chunks that shrink as
the queue empties (guided self-scheduling: a chunk is the remainder over
twice the number of routes), so a slow endpoint ends up with fewer tickets
and a failed route's unfinished chunk goes back for the others.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._endpoints import RuntimeEnv
from ._plan import Ticket
from ._tickets import IndexRuns, TicketSeq, as_seq

__all__ = ["EnvGate", "TicketQueue", "env_key"]


def env_key(value: Any) -> Hashable | None:
    """Which endpoint ``value`` names, or ``None`` when each route gets its own.

    Addresses compare without a ``tcp://`` prefix; objects (a gymnasium env,
    a ``RuntimeEnv``, a list of lanes) by identity. A factory makes a new env
    per route, so it never waits.
    """
    if isinstance(value, str):
        address = value.strip()
        return ("address", address.removeprefix("tcp://"))
    if isinstance(value, list | tuple):
        return ("lanes", tuple(id(item) for item in value))
    if _is_factory(value):
        return None
    return ("object", id(value))


def _is_factory(value: Any) -> bool:
    import gymnasium

    if isinstance(value, gymnasium.Env | gymnasium.vector.VectorEnv):
        return False
    return callable(value) and not isinstance(value, RuntimeEnv)


class EnvGate:
    """One lock per env endpoint; :meth:`hold` waits until the endpoint is free.

    Trio locks are fair (FIFO), so routes sharing an endpoint get it in the
    order they asked, which is route order.
    """

    def __init__(self) -> None:
        self._locks: dict[Hashable, trio.Lock] = {}

    @asynccontextmanager
    async def hold(self, value: Any) -> AsyncIterator[None]:
        """Hold ``value``'s endpoint for the body.

        Cancellation: a route cancelled while waiting leaves the queue at once.
        """
        key = env_key(value)
        if key is None:
            yield
            return
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            yield


class TicketQueue:
    """Unfinished tickets of one route or ticket pool, in plan order.

    Only the Trio thread touches it (no locks): a claim is never split
    across a checkpoint, so two routes can never claim the same ticket.
    The queue holds index ranges and claims are :class:`TicketSeq` views:
    a budget of millions of episodes costs no memory (see :meth:`lazy`).
    A static route claims one run of tickets at a time (all of them, unless
    a resume left gaps: then one session per run).
    """

    def __init__(
        self, tickets: Iterable[Ticket], *, routes: int = 1, dynamic: bool = False
    ) -> None:
        seq = as_seq(tickets)
        self._make: Callable[[int], Ticket] = seq.make
        self._left = seq.indices
        self._routes = max(1, routes)
        self._dynamic = dynamic
        #: Failed sessions each ticket was part of (by episode index), whoever ran them.
        self.failures: dict[int, int] = {}
        # Claims not yet given back: while any is out, an empty queue is not a drained one.
        self._held = 0
        self._changed = trio.Event()

    @classmethod
    def lazy(
        cls,
        make: Callable[[int], Ticket],
        count: int,
        done: Iterable[int] = (),
        *,
        routes: int = 1,
        dynamic: bool = False,
    ) -> TicketQueue:
        """Tickets ``make(0)`` .. ``make(count - 1)`` except the indices in ``done``."""
        queue = cls((), routes=routes, dynamic=dynamic)
        queue._make = make
        queue._left = IndexRuns.all_but(count, done)
        return queue

    @classmethod
    def of_runs(
        cls,
        make: Callable[[int], Ticket],
        left: IndexRuns,
        *,
        routes: int = 1,
        dynamic: bool = False,
    ) -> TicketQueue:
        """Tickets ``make(i)`` for the indices in ``left`` (a shard's owed share of a pool)."""
        queue = cls((), routes=routes, dynamic=dynamic)
        queue._make = make
        queue._left = left
        return queue

    def __len__(self) -> int:
        return len(self._left)

    def claim(self) -> TicketSeq:
        """The next tickets for one route (empty: nothing left).

        A claim is one contiguous run of indices (a resumed plan with gaps is
        claimed run by run), so a session's trials are one ``range``.
        """
        if not self._left:
            return TicketSeq(self._make, IndexRuns())
        size = len(self._left.runs[0])
        if self._dynamic:
            size = min(size, max(1, math.ceil(len(self._left) / (2 * self._routes))))
        chunk, self._left = self._left[:size], self._left[size:]
        self._held += 1
        return TicketSeq(self._make, chunk)

    async def next_claim(self) -> TicketSeq:
        """The next tickets for one route; empty only once the queue is drained.

        An empty queue while another route still holds a claim is not drained:
        that route may fail and give tickets back, so this waits until every
        claim is settled (with :meth:`release`) or tickets come back.

        Cancellation: leaves at once, holding nothing.
        """
        while not (batch := self.claim()) and self._held:
            await self._changed.wait()
        return batch

    def release(self, tickets: Sequence[Ticket] | IndexRuns) -> None:
        """Settle a claim: give back the tickets (or indices) it did not finish
        (first in line again; empty when it finished them all).

        Every non-empty claim is released exactly once, finished or not.
        """
        back = tickets if isinstance(tickets, IndexRuns) else IndexRuns.of(t.index for t in tickets)
        self._left = IndexRuns([*back.runs, *self._left.runs])
        self._held = max(0, self._held - 1)
        self._changed.set()
        self._changed = trio.Event()
