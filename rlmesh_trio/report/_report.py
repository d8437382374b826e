"""The outcome of a multi-route run: per-route status, every episode, totals, telemetry."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._errors import RlmeshTrioError
from .._extras import MissingExtra
from ..runtime import merge_telemetry
from ..runtime._results import EpisodeResult, TelemetryRow
from ._bundle import MediaRef, write_bundle
from ._decode import report_parts
from ._finite import nonfinite_note, strict_json_value
from ._outcome import RouteOutcome, RunMeta
from ._stats import DEFAULT_SEED, statistics_block

__all__ = ["REPORT_SCHEMA", "REPORT_VERSION", "RunFailed", "RunReport", "report_from_dict"]

#: The JSON report's contract: ``{"schema": REPORT_SCHEMA, "schema_version": REPORT_VERSION}``.
REPORT_SCHEMA = "rlmesh-trio.report"
REPORT_VERSION = 2


@attrs.frozen(repr=False)
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

    def __repr__(self) -> str:
        # Counts, not contents: a run of thousands of episodes prints on one line.
        statuses = Counter(outcome.status for outcome in self.routes)
        counted = ", ".join(f"{status}={n}" for status, n in sorted(statuses.items()))
        return (
            f"RunReport(routes={len(self.routes)} ({counted or 'none'}), "
            f"episodes={self.total_episodes}, steps={self.total_steps}, "
            f"wall_s={self.wall_s:.3f})"
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
    def run_steps(self) -> int:
        """The steps this run made (``total_steps`` less ``resumed_steps``)."""
        return max(self.total_steps - self.resumed_steps, 0)

    @property
    def steps_per_s(self) -> float:
        return self.run_steps / self.wall_s if self.wall_s > 0 else 0.0

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
        ``reward: None`` and ``reward_raw: "nan"``. Without scipy (the
        ``results`` extra) ``statistics`` is ``None`` with a
        ``statistics_note`` saying what to install; the episodes are all there,
        so ``rlmesh-trio report`` recomputes the figures where scipy is.
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
            **self._statistics_entry(),
        }

    def _statistics_entry(self) -> dict[str, Any]:
        try:
            return {"statistics": self.statistics()}
        except MissingExtra as exc:
            return {"statistics": None, "statistics_note": str(exc)}

    def statistics(self, *, seed: int | None = None) -> dict[str, Any]:
        """Episode-return figures per route and for the run: mean, std, IQM, 95% bootstrap CIs.

        Seeded (``seed``, or a fixed default), so the same episodes give the same figures.

        Raises:
            MissingExtra: scipy (the ``results`` extra) is not installed.
        """
        return statistics_block(self, seed=DEFAULT_SEED if seed is None else seed)

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> RunReport:
        """Rebuild a report from :meth:`to_json` text (or its parsed dict).

        Raises:
            RunFileError: the input is not a run report.
        """
        return cls(**report_parts(data))

    def export_bundle(
        self, path: str | Path, media: Mapping[tuple[str, int], Sequence[MediaRef]] | None = None
    ) -> Path:
        """Write an ``rlmesh.result.v1`` bundle (a folder, or a zip when ``path`` ends ``.zip``).

        ``media`` maps ``(route_id, episode index)`` to recorded videos, as
        :attr:`rlmesh_trio.results.Recording.media` gives them.

        Raises:
            InvalidSpec: ``path`` cannot hold a bundle. OSError: a write failed.
        """
        return write_bundle(self, path, media)

    def to_json(self, *, indent: int | None = 2) -> str:
        """Strict JSON (no ``NaN``/``Infinity`` tokens): any other non-finite float is ``null``."""
        return json.dumps(strict_json_value(self.to_dict()), indent=indent, allow_nan=False)


def report_from_dict(data: Any, where: str = "report") -> RunReport:
    """A :class:`RunReport` from :meth:`RunReport.to_dict` output (or its JSON text).

    Route telemetry reservoirs are not in the JSON, so the rebuilt report keeps
    the run-level telemetry rows as they were written.

    Raises:
        RunFileError: ``data`` is not a run report (names ``where`` and the bad part).
    """
    return RunReport(**report_parts(data, where))


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
