"""The coordinator's book of a distributed run: per route, which tickets are done and how it ended.

Each planned episode (ticket) is kept at most once, whichever shard or
attempt delivered it first; the merged report is built from this book alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..orchestrator._route import Route
from ..orchestrator._tickets import IndexRuns
from ..report._outcome import RouteOutcome, RunMeta
from ..report._report import RunReport
from ..runtime import merge_telemetry
from ..runtime._results import EpisodeResult, RouteReport, SeriesSnapshot
from ._work import RouteEnded

__all__ = ["PoolBook", "RouteBook", "books_of", "merged_report"]


class PoolBook:
    """Which tickets of one ticket pool are done, whichever of its routes ran them."""

    def __init__(self, name: str, budget: int) -> None:
        self.name = name
        self.planned = range(budget)
        self.done: set[int] = set()

    @property
    def owed(self) -> IndexRuns:
        """The tickets not yet done, as index ranges (costs the done count, not the budget)."""
        return IndexRuns.all_but(len(self.planned), self.done)


class RouteBook:
    """One route's tickets and outcome while the run is in flight.

    A route of a ticket pool (``pool``) keeps the episodes it ran (under the
    pool's indices) and owes what the pool owes: a ticket is done once, by
    whichever route of the pool ran it first.
    """

    def __init__(self, route: Route, pool: PoolBook | None = None) -> None:
        self.route = route
        self.route_id = str(route.route_id)
        self.pool = pool
        budget = route.episode_budget
        self.planned = range(budget or 0)
        self.done: dict[int, EpisodeResult] = {}
        self.parts: list[RouteReport] = []
        self.status: str | None = None
        self.error: BaseException | None = None
        self.env = route.env if isinstance(route.env, str) else type(route.env).__name__
        self.model = route.model if isinstance(route.model, str) else type(route.model).__name__
        self.wall_s = 0.0
        self.attempts = 1
        self.retries = 0
        self.resumed_steps = 0
        self.env_contract: Mapping[str, str] | None = None

    def resume(self, finished: Mapping[int, EpisodeResult]) -> None:
        """Count the episodes a ledger already holds as done (they are not run again)."""
        self.done.update(finished)
        if self.pool is not None:
            self.pool.done.update(finished)
        self.resumed_steps = sum(ep.steps for ep in finished.values())

    @property
    def owed(self) -> IndexRuns:
        """The tickets still to run, as index ranges (a pool route: the pool's)."""
        if self.pool is not None:
            return self.pool.owed
        return IndexRuns.all_but(len(self.planned), self.done)

    @property
    def ended(self) -> bool:
        return self.status is not None

    def add(self, result: EpisodeResult) -> bool:
        """Keep ``result`` unless its ticket is already done; True when it was new."""
        taken = self.pool.done if self.pool is not None else self.done
        if result.index in taken or result.index not in self.planned:
            return False
        self.done[result.index] = result
        if self.pool is not None:
            self.pool.done.add(result.index)
        return True

    def part_ended(self, ended: RouteEnded) -> None:
        self.env, self.model = ended.env, ended.model
        self.env_contract = ended.env_contract or self.env_contract
        self.wall_s += ended.wall_s
        self.retries += ended.retries
        if ended.report is not None:
            self.parts.append(ended.report)

    def end(self, status: str, error: BaseException | None = None) -> None:
        if self.status is None:
            self.status, self.error = status, error

    def outcome(self, pending: BaseException | None) -> RouteOutcome:
        status, error = self.status, self.error
        if status is None:
            status, error = "cancelled", pending
        return RouteOutcome(
            route_id=self.route_id,
            env=self.env,
            model=self.model,
            status=status,  # type: ignore[arg-type]
            error=error,
            report=self._report(),
            wall_s=self.wall_s,
            retries=self.retries,
            env_contract=self.env_contract,
            resumed_steps=self.resumed_steps,
        )

    def _report(self) -> RouteReport:
        episodes = [self.done[i] for i in sorted(self.done)]
        samples = _merged_samples(part.samples for part in self.parts)
        first = self.parts[0] if self.parts else None
        return RouteReport(
            route_id=self.route_id,
            session_id=first.session_id if first else self.route_id,
            env_id=first.env_id if first else "",
            total_steps=sum(ep.steps for ep in episodes),
            total_episodes=len(episodes),
            episodes=episodes,
            telemetry=merge_telemetry(self.parts),
            samples=samples,
        )


def books_of(routes: Sequence[Route]) -> dict[str, RouteBook]:
    """A book per route (ids set), the routes of one ticket pool sharing one :class:`PoolBook`."""
    pools: dict[str, PoolBook] = {}
    books: dict[str, RouteBook] = {}
    for route in routes:
        name = route.ticket_pool
        pool = None
        if name is not None:
            pool = pools.setdefault(name, PoolBook(name, route.episode_budget or 0))
        books[str(route.route_id)] = RouteBook(route, pool)
    return books


def _merged_samples(
    parts: Iterable[Mapping[tuple[str, str, str], SeriesSnapshot]],
) -> dict[tuple[str, str, str], SeriesSnapshot]:
    merged: dict[tuple[str, str, str], SeriesSnapshot] = {}
    for samples in parts:
        for key, (count, total, pool) in samples.items():
            c, t, p = merged.get(key, (0, 0.0, ()))
            merged[key] = (c + count, t + total, p + tuple(pool))
    return merged


def merged_report(
    books: Iterable[RouteBook],
    wall_s: float,
    pending: Mapping[str, BaseException],
    meta: RunMeta | None = None,
) -> RunReport:
    """The run's report in route order; ``pending`` names why unfinished routes stopped."""
    books = list(books)
    return RunReport(
        routes=tuple(book.outcome(pending.get(book.route_id)) for book in books),
        wall_s=wall_s,
        meta=meta,
        resumed_steps=sum(book.resumed_steps for book in books),
    )
