"""Live progress bars for a run: one per route and a total, drawn with ``rich``."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ..runtime._events import (
    EpisodeCompletedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
)
from ..runtime._hooks import RuntimeHooks

__all__ = ["RichProgress"]

TOTAL = "__total__"


class RichProgress(RuntimeHooks):
    """A progress bar per route (episodes done of its budget) and one for the whole run.

    Best used as a context manager around the run, so the live display is
    torn down even when the run fails::

        with RichProgress(routes) as progress:
            report = await rt.run_routes(routes, hooks=progress)

    Passed as ``hooks=`` on its own, it starts drawing at the first event and
    stops once every route it was given has ended. ``routes`` (optional) gives
    each bar its total up front; without it a bar appears when its route
    starts. Steps are shown beside each bar.
    """

    def __init__(
        self,
        routes: Sequence[Any] | None = None,
        *,
        console: Console | None = None,
        transient: bool = False,
    ) -> None:
        self._progress = Progress(
            TextColumn("{task.description:<18}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("episodes  {task.fields[steps]:>8} steps  {task.fields[state]}"),
            TimeElapsedColumn(),
            console=console,
            transient=transient,
        )
        self._tasks: dict[str, TaskID] = {}
        self._steps: dict[str, int] = {}
        self._live = False
        self._expected = len(routes or ())
        self._ended: set[str] = set()
        self._episode_steps: set[str] = set()
        grand_total = 0
        known_total = True
        for i, route in enumerate(routes or ()):
            route_id = getattr(route, "route_id", None) or f"route-{i}"
            budget = getattr(route, "episode_budget", None)
            if budget is None:
                known_total = False
            else:
                grand_total += budget
            self._add(route_id, budget)
        self._tasks[TOTAL] = self._progress.add_task(
            "total",
            total=grand_total if routes and known_total else None,
            steps=0,
            state="",
        )

    def _add(self, route_id: str, total: int | None) -> TaskID:
        task = self._progress.add_task(route_id, total=total, steps=0, state="")
        self._tasks[route_id] = task
        self._steps[route_id] = 0
        return task

    def _task(self, route_id: str) -> TaskID:
        task = self._tasks.get(route_id)
        return task if task is not None else self._add(route_id, None)

    def start(self) -> None:
        if not self._live:
            self._live = True
            self._progress.start()

    def stop(self) -> None:
        if self._live:
            self._live = False
            self._progress.stop()

    def __enter__(self) -> RichProgress:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _route_over(self, route_id: str) -> None:
        self._ended.add(route_id)
        if self._expected and len(self._ended) >= self._expected:
            self.stop()

    async def session_started(self, event: SessionStartedEvent) -> None:
        self.start()
        self._progress.update(self._task(event.route.route_id), state="running")

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        route_id = event.route.route_id
        if route_id in self._episode_steps or not self._steps.get(route_id):
            # No step events reach us (a sharded run streams episodes only): count by episode.
            self._episode_steps.add(route_id)
            self._steps[route_id] = self._steps.get(route_id, 0) + event.step_count
            self._progress.update(self._task(route_id), steps=self._steps[route_id])
            self._progress.update(self._tasks[TOTAL], steps=sum(self._steps.values()))
        self._progress.advance(self._task(route_id))
        self._progress.advance(self._tasks[TOTAL])

    async def step_completed(self, event: StepCompletedEvent) -> None:
        route_id = event.route.route_id
        self._steps[route_id] = self._steps.get(route_id, 0) + 1
        self._progress.update(self._task(route_id), steps=self._steps[route_id])
        self._progress.update(self._tasks[TOTAL], steps=sum(self._steps.values()))

    async def session_ended(self, event: SessionEndedEvent) -> None:
        self._progress.update(self._task(event.route.route_id), state="[green]done")
        self._route_over(event.route.route_id)

    async def session_failed(self, event: SessionFailedEvent) -> None:
        self._progress.update(self._task(event.route.route_id), state="[red]stopped")
        self._route_over(event.route.route_id)
