"""What the dashboard knows about a run: one row per route, sampled returns, throughput history.

Everything here is bounded and O(1) per event: a row per route, at most
:data:`REWARD_SAMPLE` returns (a uniform reservoir once more arrive), and at
most :data:`HISTORY_POINTS` throughput points (neighbouring points merge,
doubling the bucket, when the history fills). Writers are the run's hook (its
Trio thread) or a ledger follower; readers are the server's thread: a lock
guards both, held only for a few dictionary updates or one copy.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["HISTORY_POINTS", "REWARD_SAMPLE", "DashboardState", "RouteRow"]

#: Returns kept for the statistics and histogram (a reservoir past this).
REWARD_SAMPLE = 5000
#: Throughput points kept; past this, pairs merge and the bucket doubles.
HISTORY_POINTS = 240
#: Videos listed on the page (the newest).
VIDEO_LIMIT = 24
ERROR_CHARS = 400

STATUSES = ("pending", "running", "retrying", "completed", "failed", "cancelled")


@attrs.define
class RouteRow:
    """One route as the grid shows it."""

    route_id: str
    planned: int | None = None
    status: str = "pending"
    done: int = 0
    steps: int = 0
    started: float | None = None
    last: float | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        span = (self.last or 0.0) - (self.started or 0.0)
        rate = self.steps / span if self.started is not None and span > 0 else None
        return {
            "route": self.route_id,
            "status": self.status,
            "done": self.done,
            "planned": self.planned,
            "steps": self.steps,
            "stepsPerS": rate,
            "error": self.error,
        }


class _History:
    """Steps per bucket over time; merges pairs when full, so memory stays bounded."""

    def __init__(self, origin: float, bucket: float = 1.0) -> None:
        self.origin = origin
        self.bucket = bucket
        self.counts: list[float] = []

    def _slot(self, at: float) -> int:
        slot = int((at - self.origin) / self.bucket)
        while slot >= HISTORY_POINTS:
            self._halve()
            slot = int((at - self.origin) / self.bucket)
        if slot >= len(self.counts):
            self.counts.extend([0.0] * (slot + 1 - len(self.counts)))
        return max(slot, 0)

    def add(self, start: float, end: float, steps: int) -> None:
        """``steps`` spread evenly over ``start``..``end`` (an episode's span)."""
        last = self._slot(end)
        start = max(start, self.origin)
        if end - start <= 0:
            self.counts[last] += steps
            return
        rate = steps / (end - start)
        for slot in range(int((start - self.origin) / self.bucket), last + 1):
            low = max(start, self.origin + slot * self.bucket)
            high = min(end, self.origin + (slot + 1) * self.bucket)
            if high > low:
                self.counts[slot] += rate * (high - low)

    def _halve(self) -> None:
        pairs = zip(self.counts[0::2], [*self.counts[1::2], 0.0], strict=False)
        self.counts = [a + b for a, b in pairs]
        self.bucket *= 2

    def points(self) -> dict[str, Any]:
        return {
            "t": [(i + 0.5) * self.bucket for i in range(len(self.counts))],
            "stepsPerS": [c / self.bucket for c in self.counts],
        }


class DashboardState:
    """A run's live picture, fed by events and read as JSON snapshots.

    ``version`` grows on every change, so a reader can skip unchanged states.
    Thread-safe: every method takes the lock briefly.
    """

    def __init__(self, title: str = "rlmesh-trio run", clock: Any = time.monotonic) -> None:
        self.title = title
        self._clock = clock
        self._lock = threading.Lock()
        self._rows: dict[str, RouteRow] = {}
        self._started = clock()
        self._history = _History(self._started)
        self._rewards: list[float] = []
        self._reward_count = 0
        self._rng = random.Random(0)
        self._videos: list[dict[str, Any]] = []
        self.version = 0
        self.reward_version = 0
        self.ended = False
        self.final = False

    def now(self) -> float:
        """This state's clock."""
        return float(self._clock())

    # -- writers ---------------------------------------------------------------
    def plan(self, planned: Iterable[tuple[str, int | None]]) -> None:
        """Name the routes up front, with their episode budgets (``None``: unbounded)."""
        with self._lock:
            for route_id, budget in planned:
                self._row(route_id).planned = budget
            self.version += 1

    def _row(self, route_id: str) -> RouteRow:
        row = self._rows.get(route_id)
        if row is None:
            row = self._rows[route_id] = RouteRow(route_id)
        return row

    def started(self, route_id: str) -> None:
        with self._lock:
            row = self._row(route_id)
            row.status = "running"
            if row.started is None:
                row.started = row.last = self._clock()
            self.version += 1

    def restart_clock(self, origin: float) -> None:
        """Count time from ``origin`` (on this state's clock): the run's own start."""
        with self._lock:
            self._started = origin
            self._history = _History(origin)
            self.version += 1

    def episode(
        self,
        route_id: str,
        reward: float,
        steps: int,
        at: float | None = None,
        started: float | None = None,
    ) -> None:
        """One finished episode (``at``: when it finished, ``started``: when it began, on this
        state's clock; default now)."""
        now = self._clock() if at is None else at
        with self._lock:
            row = self._row(route_id)
            if row.started is None:
                row.started = now if started is None else min(started, now)
            if row.status in ("pending", "retrying"):
                row.status = "running"
            row.done += 1
            row.steps += steps
            row.last = max(now, row.last or now)
            self._history.add(now if started is None else started, now, steps)
            self._sample(reward)
            self.version += 1

    def _sample(self, reward: float) -> None:
        self._reward_count += 1
        if len(self._rewards) < REWARD_SAMPLE:
            self._rewards.append(reward)
        else:  # reservoir sampling: every return so far equally likely to be kept
            slot = self._rng.randrange(self._reward_count)
            if slot < REWARD_SAMPLE:
                self._rewards[slot] = reward
        self.reward_version += 1

    def retrying(self, route_id: str, message: str) -> None:
        with self._lock:
            row = self._row(route_id)
            row.status = "retrying"
            row.error = message[:ERROR_CHARS]
            self.version += 1

    def ended_route(self, route_id: str, status: str, message: str = "") -> None:
        with self._lock:
            row = self._row(route_id)
            row.status = status if status in STATUSES else "failed"
            if message:
                row.error = message[:ERROR_CHARS]
            row.last = self._clock() if row.started is not None else row.last
            self.version += 1

    def video(self, route_id: str, episode: int, url: str, caption: str) -> None:
        with self._lock:
            self._videos.append(
                {"route": route_id, "episode": episode, "url": url, "caption": caption}
            )
            del self._videos[:-VIDEO_LIMIT]
            self.version += 1

    def run_ended(self) -> None:
        with self._lock:
            self.ended = True
            self.version += 1

    def report_ready(self) -> None:
        with self._lock:
            self.final = True
            self.version += 1

    # -- readers ---------------------------------------------------------------
    def rewards(self) -> tuple[list[float], int]:
        """A copy of the sampled returns and how many returns were seen in all."""
        with self._lock:
            return list(self._rewards), self._reward_count

    def snapshot(self, stats: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The page's whole state as JSON-ready data (``stats``: the latest statistics)."""
        with self._lock:
            rows = [row.to_dict() for row in self._rows.values()]
            history = self._history.points()
            videos = list(self._videos)
            version, ended, final = self.version, self.ended, self.final
        elapsed = self._clock() - self._started
        return {
            "title": self.title,
            "version": version,
            "elapsed": elapsed,
            "routes": rows,
            "progress": _progress(rows, elapsed, ended),
            "throughput": history,
            "stats": dict(stats or {}),
            "videos": videos,
            "ended": ended,
            "final": final,
        }


def _progress(rows: list[dict[str, Any]], elapsed: float, ended: bool) -> dict[str, Any]:
    """Episodes done of planned over the whole run, and an ETA from the pace so far."""
    done = sum(r["done"] for r in rows)
    bounded = all(r["planned"] is not None for r in rows) and bool(rows)
    # A route that stopped early will run no more: count what it did as its whole share.
    planned = sum(
        (r["planned"] or 0) if r["status"] not in ("failed", "cancelled") else r["done"]
        for r in rows
    )
    eta = None
    if bounded and not ended and 0 < done < planned and elapsed > 0:
        eta = (planned - done) * elapsed / done
    return {
        "done": done,
        "planned": planned if bounded else None,
        "fraction": done / planned if bounded and planned else (1.0 if ended else None),
        "eta": 0.0 if ended else eta,
        "steps": sum(r["steps"] for r in rows),
    }
