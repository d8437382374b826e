"""One route's mutable state while a run is in flight, and its outcome."""

from __future__ import annotations

import time

from .._errors import RouteCancelled
from ..report import RouteStatus
from ..report._outcome import RouteOutcome
from ..runtime._results import RouteReport
from ._attempts import RouteRun

__all__ = ["Slot"]


class Slot:
    """Mutable per-route state while the run is in flight."""

    __slots__ = (
        "driver",
        "ended",
        "env_label",
        "error",
        "model_label",
        "report",
        "route_id",
        "started",
        "status",
    )

    def __init__(self, route_id: str) -> None:
        self.route_id = route_id
        self.env_label = "?"
        self.model_label = "?"
        self.driver: RouteRun | None = None
        self.status: RouteStatus | None = None
        self.error: BaseException | None = None
        self.report: RouteReport | None = None
        self.started: float | None = None
        self.ended: float | None = None

    def outcome(self, pending_reason: str) -> RouteOutcome:
        status = self.status
        error = self.error
        report = self.report
        if report is None and self.driver is not None:
            report = self.driver.report()
        if status is None:
            # Never finished: queued behind the concurrency cap or still being torn down.
            status = "cancelled"
            step = self.driver.step if self.driver is not None else 0
            error = error or RouteCancelled(self.route_id, step, pending_reason)
        return RouteOutcome(
            route_id=self.route_id,
            env=self.env_label,
            model=self.model_label,
            status=status,
            error=error,
            report=report,
            wall_s=self._wall(),
            retries=self.driver.retries + self.driver.resumed_retries if self.driver else 0,
            env_contract=self.driver.env_contract if self.driver else None,
            resumed_steps=self.driver.resumed_steps if self.driver else 0,
        )

    def _wall(self) -> float:
        if self.started is None:
            return 0.0
        end = self.ended if self.ended is not None else time.perf_counter()
        return end - self.started
