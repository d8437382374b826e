"""``Dashboard``: the run's hook that feeds the live page, and the page's server.

Best effort by design: each event is a few dictionary updates under a lock
(no I/O, no awaiting), and an error inside the dashboard is logged once and
never raised into a route. Steps are counted per finished episode (the
dashboard does not override ``step_completed``, so the driver builds no
per-step event for it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._errors import InvalidSpec
from ..runtime._events import (
    EpisodeCompletedEvent,
    LogEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from ..runtime._hooks import RuntimeHooks
from ._hub import Hub
from ._state import DashboardState
from ._thread import ServerThread, is_loopback, parse_address

if TYPE_CHECKING:
    from ..report._report import RunReport

__all__ = ["RETRY_SOURCE", "Dashboard", "check_address"]

log = logging.getLogger("rlmesh_trio.dashboard")

#: ``LogEvent.source`` of the orchestrator's "retrying" notices.
RETRY_SOURCE = "retry"


def check_address(address: str | None, token: str | None) -> tuple[str, int]:
    """The dashboard's ``(host, port)``; anything but loopback needs a token.

    Raises:
        InvalidSpec: a malformed address, or a non-loopback one without a token.
    """
    try:
        host, port = parse_address(address)
    except ValueError as exc:
        raise InvalidSpec(str(exc)) from None
    if not is_loopback(host) and not token:
        raise InvalidSpec(
            f"dashboard address {address}: binding beyond loopback needs a token "
            "(token=..., --dashboard-token)"
        )
    return host, port


class Dashboard(RuntimeHooks):
    """A live page for a run: pass it as ``hooks=`` and open :attr:`url` in a browser.

    ``routes`` (optional) names the routes and their budgets up front;
    ``address`` is ``HOST:PORT`` (default ``127.0.0.1`` and a free port);
    ``token`` is required to bind beyond loopback, and then the page asks for
    it. ``recording``: a :class:`~rlmesh_trio.results.Recording`, whose
    videos appear as they finish. The server starts on :meth:`start` (or the
    first event) on a thread of its own; :meth:`finish` hands it the final
    report; :meth:`close` stops it::

        with rt.hooks.Dashboard(routes) as dash:
            print(dash.url)
            report = await rt.run_routes(routes, hooks=dash)
            dash.finish(report)

    Raises:
        InvalidSpec: (at construction) a bad address, or beyond loopback without a token.
    """

    def __init__(
        self,
        routes: Sequence[Any] | None = None,
        *,
        address: str | None = None,
        token: str | None = None,
        title: str = "rlmesh-trio run",
        recording: Any = None,
    ) -> None:
        self._host, self._port = check_address(address, token)
        self.state = DashboardState(title)
        self.recording = recording
        self._hub = Hub(self.state, token=token, recording=recording)
        self._server = ServerThread(self._hub, self._host, self._port)
        self._faulted = False
        if routes:
            self.plan(routes)

    def plan(self, routes: Sequence[Any]) -> None:
        """Show these routes (``Route`` objects) and their budgets before they start."""
        self.state.plan(
            (getattr(r, "route_id", None) or f"route-{i}", getattr(r, "episode_budget", None))
            for i, r in enumerate(routes)
        )

    @property
    def url(self) -> str | None:
        """The page's address once started (``None`` before)."""
        return self._server.url

    def start(self) -> str:
        """Start serving (idempotent); returns the page's URL.

        Raises:
            DashboardUnavailable: the ``dashboard`` extra is not installed.
            OSError: the address cannot be bound.
        """
        return self._server.start()

    def _fault(self, exc: Exception) -> None:
        if not self._faulted:
            self._faulted = True
            log.warning("dashboard: %s: %s (further errors not logged)", type(exc).__name__, exc)

    def _ensure_started(self) -> None:
        if self._server.url is None and not self._faulted:
            self.start()

    # -- hook events (the run's thread; never raise) -----------------------------
    async def session_started(self, event: SessionStartedEvent) -> None:
        try:
            self._ensure_started()
            self.state.started(event.route.route_id)
        except Exception as exc:
            self._fault(exc)

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        try:
            now = self.state.now()
            self.state.episode(
                event.route.route_id,
                event.cumulative_reward,
                event.step_count,
                at=now,
                started=now - event.duration_ms / 1000.0,
            )
        except Exception as exc:
            self._fault(exc)

    async def session_ended(self, event: SessionEndedEvent) -> None:
        try:
            self.state.ended_route(event.route.route_id, "completed")
        except Exception as exc:
            self._fault(exc)

    async def session_failed(self, event: SessionFailedEvent) -> None:
        try:
            name = type(event.error).__name__ if event.error is not None else ""
            status = "cancelled" if name in ("RouteCancelled", "Cancelled") else "failed"
            self.state.ended_route(event.route.route_id, status, event.reason)
        except Exception as exc:
            self._fault(exc)

    async def log(self, event: LogEvent) -> None:
        try:
            if event.source == RETRY_SOURCE:
                self.state.retrying(event.route.route_id, event.message)
        except Exception as exc:
            self._fault(exc)

    # -- the end ---------------------------------------------------------------
    def finish(
        self,
        report: RunReport,
        media: Mapping[tuple[str, int], Sequence[Any]] | None = None,
    ) -> None:
        """Show ``report`` as the final page (rendered now, as ``--html`` renders it), and its
        figures (``n``, mean, IQM and CIs exactly as in its JSON) in the returns panel.

        Blocking (a second or so for the plots and videos): call it once the
        run is over. Never raises: a failure is logged and the page stays live.
        """
        from ..results import render_html

        try:
            for outcome in report.routes:
                message = str(outcome.error) if outcome.error is not None else ""
                self.state.ended_route(outcome.route_id, outcome.status, message)
            self._hub.final_statistics(report)  # the report's figures, not the last sample's
            self.state.run_ended()
            if media is None and self.recording is not None:
                media = self.recording.media
            self._hub.set_report(render_html(report, media or {}, title=self.state.title))
        except Exception as exc:
            self._fault(exc)

    def wait_viewed(self, timeout: float) -> bool:
        """Block until every open page has moved on to the final report, at most ``timeout`` s."""
        return self._hub.wait_streams_closed(timeout)

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self._server.stop()

    def __enter__(self) -> Dashboard:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
