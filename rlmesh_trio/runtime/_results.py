"""What a route produces: episode results, telemetry rows and the route report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = [
    "EpisodeRecord",
    "EpisodeResult",
    "RouteReport",
    "SeriesSnapshot",
    "TelemetryRow",
    "record_id",
]

#: ``(count, total, reservoir samples)`` of one telemetry series, keyed by
#: ``(op, component, metric)``; kept on reports so runs can merge routes exactly.
SeriesSnapshot = tuple[int, float, tuple[float, ...]]


def record_id(index: int) -> str:
    """The id of the route's ``index``-th started episode (0-based): ``ep-000001``."""
    return f"ep-{index + 1:06d}"


@attrs.frozen(slots=True)
class EpisodeRecord:
    """An episode as the route started it (before it is known how it ends)."""

    record_id: str
    index: int
    episode_id: str
    env_index: int
    seed: int | None
    started_from_auto_reset: bool


@attrs.frozen(slots=True)
class EpisodeResult:
    """One finished episode.

    ``index`` is the episode's start order on its route (0-based). ``steps``
    and ``reward`` come from the env's completion metadata (or the runtime's
    own count when the runtime truncated the episode). ``success`` is read
    from the completion's ``final_info`` (first of ``is_success``, ``success``,
    ``task_success``) and is ``None`` when absent. ``duration_s`` comes from
    the env's timestamps when it sent them, else from the runtime's clock.
    ``predict_ms`` and ``step_ms`` are the episode's own per-step means of the
    predict and env-step wall times (a predict that returned several action
    frames is spread over the steps it served), ``None`` before its first
    step; ``trial`` is ``trial_index_base + index`` (``None`` when the env
    owns its resets). These three are as in rlmesh 0.1.0's ``EpisodeResult``.
    ``attempts`` counts the sessions the episode's ticket needed (1 unless a
    broken connection made the orchestrator rerun it from its reset).
    """

    index: int
    episode_id: str
    env_index: int
    seed: int | None
    steps: int
    reward: float
    terminated: bool
    truncated: bool
    success: bool | None
    duration_s: float
    record_id: str = ""
    predict_ms: float | None = None
    step_ms: float | None = None
    trial: int | None = None
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen(slots=True)
class TelemetryRow:
    """One summary line, shaped like rlmesh's ``TelemetryRow``.

    ``unit`` is ``ms``, ``bytes`` or ``count``; percentiles are nearest-rank.
    """

    op: str
    component: str
    metric: str
    unit: str
    count: int
    avg: float
    p50: float
    p95: float
    p99: float

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _episodes(values: Iterable[EpisodeResult]) -> tuple[EpisodeResult, ...]:
    return tuple(values)


def _rows(values: Iterable[TelemetryRow]) -> tuple[TelemetryRow, ...]:
    return tuple(values)


@attrs.frozen(repr=False)
class RouteReport:
    """Everything a route did: totals, finished episodes (completion order) and telemetry.

    ``samples`` carries the raw telemetry reservoirs (not compared, not in
    ``repr``) so :func:`~rlmesh_trio.runtime.merge_telemetry` can compute
    exact counts/averages and pooled percentiles across routes.
    """

    route_id: str
    session_id: str
    env_id: str
    total_steps: int
    total_episodes: int
    episodes: tuple[EpisodeResult, ...] = attrs.field(converter=_episodes, factory=tuple)
    telemetry: tuple[TelemetryRow, ...] = attrs.field(converter=_rows, factory=tuple)
    samples: Mapping[tuple[str, str, str], SeriesSnapshot] = attrs.field(
        factory=dict, eq=False, repr=False
    )

    def __repr__(self) -> str:
        # Counts, not contents: every episode and telemetry row is in the fields.
        return (
            f"RouteReport(route_id={self.route_id!r}, env_id={self.env_id!r}, "
            f"episodes={self.total_episodes}, steps={self.total_steps}, "
            f"telemetry_rows={len(self.telemetry)})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "route_id": self.route_id,
            "session_id": self.session_id,
            "env_id": self.env_id,
            "total_steps": self.total_steps,
            "total_episodes": self.total_episodes,
            "episodes": [e.to_dict() for e in self.episodes],
            "telemetry": [r.to_dict() for r in self.telemetry],
        }
