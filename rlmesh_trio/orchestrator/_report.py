"""The outcome of a multi-route run: per-route status, every episode, totals, telemetry."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .._errors import RlmeshTrioError
from ..runtime import EpisodeResult, RouteReport, TelemetryRow, merge_telemetry
from ._finite import nonfinite_note, raw_float, strict_json_value

if TYPE_CHECKING:
    from ..results import MediaRef

__all__ = [
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "RouteOutcome",
    "RouteStatus",
    "RunFailed",
    "RunMeta",
    "RunReport",
]

RouteStatus = Literal["completed", "failed", "cancelled"]
#: The JSON report's contract: ``{"schema": REPORT_SCHEMA, "schema_version": REPORT_VERSION}``.
REPORT_SCHEMA = "rlmesh-trio.report"
REPORT_VERSION = 2


@attrs.frozen
class RunMeta:
    """Where a run came from: package versions, argv, start time (UTC, ISO 8601), its plan.

    ``plan_digest``/``plan`` are ``None`` for a run with an unbounded route;
    ``ledger`` is the ledger's path when the run kept one,
    ``resumed_episodes`` how many episodes came from it rather than this run,
    ``ledger_torn_bytes`` the size of a torn last line cut off on resume,
    and ``resumed`` the line a resume logs (``resuming LEDGER: 37 of 120
    episodes done, 83 to go``; ``None`` for a run that resumed nothing).
    """

    versions: Mapping[str, str]
    argv: tuple[str, ...]
    started_at: str
    plan_digest: str | None = None
    plan: Mapping[str, Any] | None = attrs.field(default=None, repr=False)
    ledger: str | None = None
    resumed_episodes: int = 0
    ledger_torn_bytes: int = 0
    resumed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "versions": dict(self.versions),
            "argv": list(self.argv),
            "started_at": self.started_at,
            "plan_digest": self.plan_digest,
            "plan": self.plan,
            "ledger": self.ledger,
            "resumed_episodes": self.resumed_episodes,
            "ledger_torn_bytes": self.ledger_torn_bytes,
            "resumed": self.resumed,
        }


@attrs.frozen
class RouteOutcome:
    """How one route ended. ``report`` holds its episodes even when it failed.

    ``wall_s`` is the time from the route's start (after any wait for a
    concurrency slot) to its end; 0 for a route that never started.
    ``retries`` counts the sessions the route reran after a broken connection.
    """

    route_id: str
    env: str
    model: str
    status: RouteStatus
    error: BaseException | None
    report: RouteReport | None
    wall_s: float = 0.0
    retries: int = 0

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
            "retries": self.retries,
            "episodes": [_episode_dict(ep) for ep in self.episodes],
        }


def _episode_dict(ep: EpisodeResult) -> dict[str, Any]:
    record = {
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
        "attempts": ep.attempts,
    }
    if not math.isfinite(ep.reward):
        # Strict JSON has no NaN: the number becomes null, the raw value stays readable.
        record["reward"] = None
        record["reward_raw"] = raw_float(ep.reward)
    return record


@attrs.frozen
class RunReport:
    """Everything a run produced, in route order.

    ``success_rate`` is ``None`` unless every episode reported success, as in
    rlmesh 0.1.0. ``steps_per_s`` is the steps this run made over its wall
    time: a resumed run's totals include the ledger's episodes
    (``resumed_steps`` of its steps), its speed does not.
    ``recorded_telemetry`` holds the telemetry rows of a report read back from
    JSON (:meth:`from_json`), whose routes carry no raw samples.
    """

    routes: tuple[RouteOutcome, ...]
    wall_s: float
    meta: RunMeta | None = attrs.field(default=None, eq=False)
    resumed_steps: int = 0
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
        steps = self.total_steps - self.resumed_steps
        return steps / self.wall_s if self.wall_s > 0 else 0.0

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
        """The report as plain data for JSON.

        A NaN or infinite reward makes ``mean_reward`` ``None`` with a
        ``mean_reward_note`` (``"nan in episode rewards"``); the episode keeps
        ``reward: None`` and ``reward_raw: "nan"``.
        """
        note = nonfinite_note((ep.reward for ep in self.episodes), "episode rewards")
        summary: dict[str, Any] = {"mean_reward": None if note else self.mean_reward}
        if note:
            summary["mean_reward_note"] = note
        return {
            "schema": REPORT_SCHEMA,
            "schema_version": REPORT_VERSION,
            "run": self.meta.to_dict() if self.meta is not None else None,
            "routes": [outcome.to_dict() for outcome in self.routes],
            "total_steps": self.total_steps,
            "total_episodes": self.total_episodes,
            **summary,
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
        """Strict JSON (no ``NaN``/``Infinity`` tokens): any other non-finite float is ``null``."""
        return json.dumps(strict_json_value(self.to_dict()), indent=indent, allow_nan=False)


class RunFailed(RlmeshTrioError):
    """``run_routes`` ended with a failed route under ``on_failure="cancel_siblings"``.

    ``report`` holds every route's outcome and every finished episode; the
    primary (first) route error is ``__cause__`` and ``primary``. It pickles
    with its report (fields travel as they are; ``__cause__`` does not).
    """

    def __init__(self, report: RunReport, primary: BaseException, route_id: Any) -> None:
        self.report = report
        self.primary = primary
        self.route_id = route_id
        super().__init__(f"route {route_id} failed: {primary}")
