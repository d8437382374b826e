"""Tickets made on demand: a plan of a million episodes holds index ranges, not tickets.

:class:`IndexRuns` is a sorted set of episode indices kept as disjoint
ranges (a fresh plan is one range; a resumed one has a range per gap), and
:class:`TicketSeq` turns such a set into a read-only sequence of tickets,
each made when it is read. Memory grows with the number of gaps, never with
the episode count.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

import attrs

__all__ = ["IndexRuns", "Ticket", "TicketSeq", "as_seq"]


@attrs.frozen(slots=True)
class Ticket:
    """One planned episode. ``key`` (``route/index``) is its name in the ledger."""

    route_id: str
    index: int
    seed: int | None
    trial: int

    @property
    def key(self) -> str:
        return f"{self.route_id}/{self.index}"


class IndexRuns(Sequence[int]):
    """Ascending, distinct episode indices stored as disjoint, non-adjacent ranges."""

    __slots__ = ("_ends", "runs")

    def __init__(self, runs: Iterable[range] = ()) -> None:
        merged: list[range] = []
        for run in sorted((r for r in runs if len(r)), key=lambda r: r.start):
            if merged and run.start <= merged[-1].stop:
                last = merged[-1]
                merged[-1] = range(last.start, max(last.stop, run.stop))
            else:
                merged.append(range(run.start, run.stop))
        self.runs: tuple[range, ...] = tuple(merged)
        ends, total = [], 0
        for run in self.runs:
            total += len(run)
            ends.append(total)
        self._ends = ends

    @classmethod
    def of(cls, indices: Iterable[int]) -> IndexRuns:
        """The runs of arbitrary indices (sorted and coalesced)."""
        runs: list[range] = []
        start = stop = None
        for index in sorted(set(indices)):
            if stop is not None and index == stop:
                stop += 1
                continue
            if start is not None and stop is not None:
                runs.append(range(start, stop))
            start, stop = index, index + 1
        if start is not None and stop is not None:
            runs.append(range(start, stop))
        return cls(runs)

    @classmethod
    def all_but(cls, count: int, skip: Iterable[int]) -> IndexRuns:
        """``range(count)`` without ``skip`` (costs the size of ``skip``, not of ``count``)."""
        runs, start = [], 0
        for index in sorted(set(skip)):
            if 0 <= index < count:
                runs.append(range(start, index))
                start = index + 1
        runs.append(range(start, count))
        return cls(runs)

    def without(self, skip: Iterable[int]) -> IndexRuns:
        """These indices minus ``skip`` (costs the size of ``skip``, not of the runs)."""
        cuts = sorted(i for i in set(skip) if i in self)
        runs: list[range] = []
        position = 0
        for run in self.runs:
            start = run.start
            while position < len(cuts) and cuts[position] < run.stop:
                runs.append(range(start, cuts[position]))
                start = cuts[position] + 1
                position += 1
            runs.append(range(start, run.stop))
        return IndexRuns(runs)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, position: int) -> int: ...
    @overload
    def __getitem__(self, position: slice) -> IndexRuns: ...
    def __getitem__(self, position: int | slice) -> int | IndexRuns:
        if isinstance(position, slice):
            start, stop, step = position.indices(len(self))
            if step != 1:
                raise ValueError("IndexRuns slices take no step")
            return self._between(start, stop)
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(position)
        run = bisect.bisect_right(self._ends, position)
        before = self._ends[run - 1] if run else 0
        return self.runs[run][position - before]

    def _between(self, start: int, stop: int) -> IndexRuns:
        taken: list[range] = []
        before = 0
        for run, end in zip(self.runs, self._ends, strict=True):
            low, high = max(start, before), min(stop, end)
            if low < high:
                taken.append(run[low - before : high - before])
            before = end
        return IndexRuns(taken)

    def __iter__(self) -> Iterator[int]:
        for run in self.runs:
            yield from run

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        starts = [run.start for run in self.runs]
        run = bisect.bisect_right(starts, value) - 1
        return run >= 0 and value in self.runs[run]

    def __eq__(self, other: object) -> bool:
        # Equal to the same indices in any form (a tuple, a list, other runs).
        if isinstance(other, IndexRuns):
            return self.runs == other.runs
        if isinstance(other, list | tuple | range):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IndexRuns({list(self.runs)!r})"


class TicketSeq(Sequence[Ticket]):
    """The tickets at ``indices``, each made by ``make(index)`` when read."""

    __slots__ = ("indices", "make")

    def __init__(self, make: Callable[[int], Ticket], indices: IndexRuns) -> None:
        self.make = make
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, position: int) -> Ticket: ...
    @overload
    def __getitem__(self, position: slice) -> TicketSeq: ...
    def __getitem__(self, position: int | slice) -> Ticket | TicketSeq:
        if isinstance(position, slice):
            return TicketSeq(self.make, self.indices[position])
        return self.make(self.indices[position])

    def __iter__(self) -> Iterator[Ticket]:
        make = self.make
        for index in self.indices:
            yield make(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TicketSeq | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def trials(self) -> Sequence[int]:
        """Each ticket's trial: a ``range`` for one run of tickets (trials follow indices)."""
        runs = self.indices.runs
        if len(runs) == 1:
            first = self.make(runs[0].start).trial
            return range(first, first + len(runs[0]))
        return tuple(t.trial for t in self)

    def seeds(self) -> Sequence[int | None]:
        return tuple(t.seed for t in self)


def as_seq(tickets: Sequence[Ticket] | Iterable[Ticket]) -> TicketSeq:
    """Arbitrary tickets as a :class:`TicketSeq` (kept in a dict: for small, odd sets)."""
    by_index = {t.index: t for t in tickets}
    return TicketSeq(by_index.__getitem__, IndexRuns.of(by_index))
