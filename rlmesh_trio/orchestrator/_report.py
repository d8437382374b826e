"""The outcome of a multi-route run: per-route status, every episode, totals, telemetry."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ..runtime import EpisodeResult, RouteReport, TelemetryRow, merge_telemetry

if TYPE_CHECKING:
    from ..results import MediaRef

__all__ = ["RouteOutcome", "RouteStatus", "RunReport"]

RouteStatus = Literal["completed", "failed", "cancelled"]


@attrs.frozen
class RouteOutcome:
    """How one route ended. ``report`` holds its episodes even when it failed.

    ``wall_s`` is the time from the route's start (after any wait for a
    concurrency slot) to its end; 0 for a route that never started.
    """

    route_id: str
    env: str
    model: str
    status: RouteStatus
    error: BaseException | None
    report: RouteReport | None
    wall_s: float = 0.0

    @property
    def episodes(self) -> Sequence[EpisodeResult]:
        return self.report.episodes if self.report is not None else ()

    @property
    def total_steps(self) -> int:
        return self.report.total_steps if self.report is not None else 0

    @property
    def total_episodes(self) -> int:
        return len(self.episodes)

    def to_dict(self) -> dict[str, Any]:
        error = None
        if self.error is not None:
            error = {"type": type(self.error).__name__, "message": str(self.error)}
        return {
            "route_id": self.route_id,
            "env": self.env,
            "model": self.model,
            "status": self.status,
            "error": error,
            "total_steps": self.total_steps,
            "total_episodes": self.total_episodes,
            "episodes": [_episode_dict(ep) for ep in self.episodes],
        }


def _episode_dict(ep: EpisodeResult) -> dict[str, Any]:
    return {
        "index": ep.index,
        "episode_id": ep.episode_id,
        "env_index": ep.env_index,
        "seed": ep.seed,
        "steps": ep.steps,
        "reward": ep.reward,
        "terminated": ep.terminated,
        "truncated": ep.truncated,
        "success": ep.success,
        "duration_s": ep.duration_s,
        "predict_ms": ep.predict_ms,
        "step_ms": ep.step_ms,
        "trial": ep.trial,
    }


@attrs.frozen
class RunReport:
    """Everything a run produced, in route order.

    ``success_rate`` is ``None`` unless every episode reported success, as in
    rlmesh 0.1.0. ``steps_per_s`` is total steps over the run's wall time.
    ``recorded_telemetry`` holds the telemetry rows of a report read back from
    JSON (:meth:`from_json`), whose routes carry no raw samples.
    """

    routes: tuple[RouteOutcome, ...]
    wall_s: float
    recorded_telemetry: tuple[TelemetryRow, ...] | None = attrs.field(
        default=None, eq=False, repr=False
    )

    @property
    def episodes(self) -> list[EpisodeResult]:
        return [ep for outcome in self.routes for ep in outcome.episodes]

    @property
    def total_steps(self) -> int:
        return sum(outcome.total_steps for outcome in self.routes)

    @property
    def total_episodes(self) -> int:
        return sum(outcome.total_episodes for outcome in self.routes)

    @property
    def steps_per_s(self) -> float:
        return self.total_steps / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def mean_reward(self) -> float | None:
        episodes = self.episodes
        if not episodes:
            return None
        return sum(ep.reward for ep in episodes) / len(episodes)

    @property
    def success_rate(self) -> float | None:
        episodes = self.episodes
        if not episodes or any(ep.success is None for ep in episodes):
            return None
        return sum(1 for ep in episodes if ep.success) / len(episodes)

    @property
    def telemetry(self) -> list[TelemetryRow]:
        if self.recorded_telemetry is not None:
            return list(self.recorded_telemetry)
        return merge_telemetry([o.report for o in self.routes if o.report is not None])

    @property
    def ok(self) -> bool:
        return all(outcome.status == "completed" for outcome in self.routes)

    def __iter__(self) -> Iterator[RouteOutcome]:
        return iter(self.routes)

    def outcome(self, route_id: str) -> RouteOutcome:
        for outcome in self.routes:
            if outcome.route_id == route_id:
                return outcome
        raise KeyError(route_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "routes": [outcome.to_dict() for outcome in self.routes],
            "total_steps": self.total_steps,
            "total_episodes": self.total_episodes,
            "mean_reward": self.mean_reward,
            "success_rate": self.success_rate,
            "wall_s": self.wall_s,
            "steps_per_s": self.steps_per_s,
            "telemetry": [
                {
                    "op": row.op,
                    "component": row.component,
                    "metric": row.metric,
                    "unit": row.unit,
                    "count": row.count,
                    "avg": row.avg,
                    "p50": row.p50,
                    "p95": row.p95,
                    "p99": row.p99,
                }
                for row in self.telemetry
            ],
            "statistics": self.statistics(),
        }

    def statistics(self, *, seed: int | None = None) -> dict[str, Any]:
        """Episode-return figures per route and for the run: mean, std, IQM, 95% bootstrap CIs.

        Seeded (``seed``, or a fixed default), so the same episodes give the same figures.
        """
        from ..results import statistics_block

        return statistics_block(self) if seed is None else statistics_block(self, seed=seed)

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> RunReport:
        """Rebuild a report from :meth:`to_json` text (or its parsed dict).

        Raises:
            InvalidSpec: the input is not a run report.
        """
        from ..results import report_from_dict

        return report_from_dict(data)

    def export_bundle(
        self, path: str | Path, media: Mapping[tuple[str, int], Sequence[MediaRef]] | None = None
    ) -> Path:
        """Write an ``rlmesh.result.v1`` bundle (a folder, or a zip when ``path`` ends ``.zip``).

        ``media`` maps ``(route_id, episode index)`` to recorded videos, as
        :attr:`rlmesh_trio.results.Recording.media` gives them.

        Raises:
            InvalidSpec: ``path`` cannot hold a bundle. OSError: a write failed.
        """
        from ..results import write_bundle

        return write_bundle(self, path, media)

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
