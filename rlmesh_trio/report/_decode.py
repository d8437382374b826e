"""Reading the JSON report a run wrote back into a report's parts (routes, telemetry, meta).

:func:`~rlmesh_trio.report.report_from_dict` builds the
:class:`~rlmesh_trio.RunReport` from them; reading files (a report or a
ledger) is :func:`rlmesh_trio.results.load_run`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._errors import RlmeshTrioError, RunFileError
from ..runtime._results import EpisodeResult, RouteReport, TelemetryRow
from ._outcome import RouteOutcome, RunMeta

__all__ = ["RecordedError", "report_parts"]

_STATUSES = ("completed", "failed", "cancelled")


class RecordedError(RlmeshTrioError):
    """A route error read back from a report: its kind (the class name) and message only.

    Each kind gets its own subclass named after it, so ``type(error).__name__``
    reads as it did in the run that wrote the report.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


_KINDS: dict[str, type[RecordedError]] = {}


def _recorded(kind: str, message: str) -> RecordedError:
    cls = _KINDS.get(kind)
    if cls is None:
        cls = _KINDS[kind] = type(kind, (RecordedError,), {"__module__": __name__})
    return cls(message)


def _episode(data: Mapping[str, Any], where: str) -> EpisodeResult:
    try:
        index = int(data["index"])
        return EpisodeResult(
            index=index,
            episode_id=str(data.get("episode_id", "")),
            env_index=int(data.get("env_index", 0)),
            seed=None if data.get("seed") is None else int(data["seed"]),
            steps=int(data["steps"]),
            reward=float(data["reward"]),
            terminated=bool(data["terminated"]),
            truncated=bool(data["truncated"]),
            success=None if data.get("success") is None else bool(data["success"]),
            duration_s=float(data.get("duration_s", 0.0)),
            predict_ms=data.get("predict_ms"),
            step_ms=data.get("step_ms"),
            trial=data.get("trial"),
            # Not in the JSON; the runtime names the route's i-th started episode this way.
            record_id=f"ep-{index + 1:06d}",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RunFileError(f"{where}: bad episode ({type(exc).__name__}: {exc})") from None


def _outcome(data: Any, where: str) -> RouteOutcome:
    if not isinstance(data, Mapping):
        raise RunFileError(f"{where}: is {_kind(data)}, not a route object")
    route_id = str(data.get("route_id", ""))
    where = f"{where} route {route_id or '?'}"
    status = data.get("status")
    if status not in _STATUSES:
        raise RunFileError(f"{where}: status must be one of {_STATUSES}, got {status!r}")
    if not isinstance(data.get("episodes") or [], list):
        raise RunFileError(f"{where}: 'episodes' is {_kind(data['episodes'])}, not a list")
    try:
        return _checked_outcome(data, route_id, status, where)
    except (TypeError, ValueError, AttributeError) as exc:
        raise RunFileError(f"{where}: bad route entry ({type(exc).__name__}: {exc})") from None


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: "a number", "a string", "null"..."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return names.get(type(value), "a list" if isinstance(value, list) else "an object")


def _checked_outcome(
    data: Mapping[str, Any], route_id: str, status: Any, where: str
) -> RouteOutcome:
    episodes = tuple(
        _episode(ep, f"{where} episode {i}") for i, ep in enumerate(data.get("episodes") or ())
    )
    error_data = data.get("error")
    error = None
    if isinstance(error_data, Mapping):
        error = _recorded(str(error_data.get("type", "Error")), str(error_data.get("message", "")))
    report = RouteReport(
        route_id=route_id,
        session_id=route_id,
        env_id=str(data.get("env", "")),
        total_steps=int(data.get("total_steps", sum(ep.steps for ep in episodes))),
        total_episodes=len(episodes),
        episodes=episodes,
    )
    return RouteOutcome(
        route_id=route_id,
        env=str(data.get("env", "")),
        model=str(data.get("model", "")),
        status=status,
        error=error,
        report=report,
        wall_s=float(data.get("wall_s", 0.0)),
        env_contract=_contract(data.get("env_contract")),
        resumed_steps=int(data.get("resumed_steps") or 0),
    )


def _contract(value: Any) -> dict[str, str] | None:
    """A route's ``env_contract``; ``None`` when absent (a report from before it was recorded)."""
    if not isinstance(value, Mapping) or not value.get("env_id"):
        return None
    return {str(k): str(v) for k, v in value.items()}


def _telemetry(rows: Any) -> tuple[TelemetryRow, ...]:
    fields = ("op", "component", "metric", "unit", "count", "avg", "p50", "p95", "p99")
    return tuple(TelemetryRow(**{f: row[f] for f in fields}) for row in rows or ())


def report_parts(data: Any, where: str = "report") -> dict[str, Any]:
    """The :class:`~rlmesh_trio.RunReport` fields of :meth:`~rlmesh_trio.RunReport.to_dict`
    output (or its JSON text).

    Raises:
        RunFileError: ``data`` is not a run report (names ``where`` and the bad part).
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise RunFileError(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("routes"), list):
        raise RunFileError(f"{where}: not an rlmesh-trio run report (no 'routes' list)")
    try:
        telemetry = _telemetry(data.get("telemetry"))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunFileError(f"{where}: bad telemetry row ({type(exc).__name__}: {exc})") from None
    routes = tuple(
        _outcome(route, f"{where} route entry {i}" if not isinstance(route, Mapping) else where)
        for i, route in enumerate(data["routes"])
    )
    try:
        return {
            "routes": routes,
            "wall_s": float(data.get("wall_s", 0.0)),
            "recorded_telemetry": telemetry,
            "meta": _meta(data.get("run")),
            "resumed_steps": sum(route.resumed_steps for route in routes),
        }
    except (TypeError, ValueError, AttributeError) as exc:
        raise RunFileError(f"{where}: bad run block ({type(exc).__name__}: {exc})") from None


def _meta(run: Any) -> RunMeta | None:
    """The report's ``run`` block (versions, argv, start, plan) back as a ``RunMeta``."""
    if not isinstance(run, Mapping):
        return None
    return RunMeta(
        versions=dict(run.get("versions") or {}),
        argv=tuple(run.get("argv") or ()),
        started_at=str(run.get("started_at", "")),
        plan_digest=run.get("plan_digest"),
        plan=run.get("plan"),
        ledger=run.get("ledger"),
        resumed_episodes=int(run.get("resumed_episodes") or 0),
        ledger_torn_bytes=int(run.get("ledger_torn_bytes") or 0),
        resumed=run.get("resumed"),
    )
