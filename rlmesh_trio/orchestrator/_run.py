"""Many routes under one nursery.

One Trio task per route, one shared cancel scope: under
``on_failure="cancel_siblings"`` the first route error cancels that scope,
every other running route ends with ``RouteCancelled`` naming the route that
failed first, and routes still queued behind ``max_concurrency`` never
start. Each route's terminal close (model release, env close) runs in the
driver under a shielded scope bounded by its service close timeout, so a
broken peer cannot hang the run, and no task outlives :func:`run_routes`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from functools import partial
from typing import Any, Literal

import trio

from .._errors import (
    ConnectError,
    InvalidSpec,
    OperationTimeout,
    RlmeshTrioError,
    RouteCancelled,
    RunFailed,
    format_duration,
)
from ..runtime import Limits, RouteDriver, RouteReport, RouteSpec, RuntimeHooks
from ._endpoints import EndpointPool
from ._report import RouteOutcome, RouteStatus, RunReport
from ._route import Route

__all__ = ["Orchestrator", "RunInterrupted", "run", "run_routes"]

log = logging.getLogger("rlmesh_trio.orchestrator")

OnFailure = Literal["cancel_siblings", "isolate"]
_POLICIES = ("cancel_siblings", "isolate")
CALLER_CANCELLED = "cancelled by caller"
INTERRUPTED = "interrupted by the user (SIGINT / KeyboardInterrupt)"
#: Seconds left for closing shared model clients once a run failed or was interrupted.
SHARED_CLOSE_AFTER_FAILURE = 0.25


class RunInterrupted(KeyboardInterrupt):
    """Ctrl+C stopped a run; ``report`` holds the partial report (every finished episode)."""

    def __init__(self, report: RunReport) -> None:
        super().__init__("run interrupted")
        self.report = report


class _Slot:
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
        self.driver: RouteDriver | None = None
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
        )

    def _wall(self) -> float:
        if self.started is None:
            return 0.0
        end = self.ended if self.ended is not None else time.perf_counter()
        return end - self.started


class Orchestrator:
    """Runs a set of routes once; :meth:`report` is available at any time (partial while running).

    Most callers want :func:`run_routes` or :func:`run`; the CLI uses this class
    so it can write a partial report when interrupted. ``client_options``
    (``token=``, ``ssl=``, ``connect_timeout=``) go to every gRPC client made
    from an address in a route.
    """

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        hooks: RuntimeHooks | None = None,
        on_failure: OnFailure = "cancel_siblings",
        max_concurrency: int | None = None,
        handle_sigint: bool = True,
        batch_predicts: bool = False,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        if on_failure not in _POLICIES:
            raise InvalidSpec(f"on_failure must be one of {_POLICIES}, got {on_failure!r}")
        if max_concurrency is not None and max_concurrency < 1:
            raise InvalidSpec(f"max_concurrency must be >= 1, got {max_concurrency}")
        routes = list(routes)
        for i, route in enumerate(routes):
            if not isinstance(route, Route):
                raise InvalidSpec(f"routes[{i}] is a {type(route).__name__}, not a Route")
        ids = [route.route_id or f"route-{i}" for i, route in enumerate(routes)]
        duplicates = sorted({rid for rid in ids if ids.count(rid) > 1})
        if duplicates:
            raise InvalidSpec(f"duplicate route ids: {', '.join(duplicates)}")
        self.routes = routes
        self.hooks = hooks
        self.on_failure = on_failure
        self.max_concurrency = max_concurrency
        self.handle_sigint = handle_sigint
        self.batch_predicts = batch_predicts
        self.client_options = dict(client_options or {})
        self._slots = [_Slot(rid) for rid in ids]
        self._cancel_reason = CALLER_CANCELLED
        self._primary: tuple[str, BaseException] | None = None
        self._started_at: float | None = None
        self._wall: float | None = None
        self._interrupted = False
        self._scope = trio.CancelScope()

    # -- state -----------------------------------------------------------------
    def report(self) -> RunReport:
        """The run's report so far: finished routes, and everything running routes have finished."""
        if self._wall is not None:
            wall = self._wall
        elif self._started_at is not None:
            wall = time.perf_counter() - self._started_at
        else:
            wall = 0.0
        return RunReport(
            routes=tuple(slot.outcome(self._cancel_reason) for slot in self._slots), wall_s=wall
        )

    def cancel(self, reason: str = CALLER_CANCELLED) -> None:
        """Cancel every route; each ends with ``RouteCancelled`` carrying ``reason``."""
        self._cancel_reason = reason
        self._scope.cancel()

    def _cancel_reason_now(self) -> str:
        return self._cancel_reason

    # -- running ---------------------------------------------------------------
    async def run(self) -> RunReport:
        """Run every route; see :func:`run_routes` for the failure and cancellation contract."""
        self._started_at = time.perf_counter()
        limiter = trio.CapacityLimiter(self.max_concurrency or max(1, len(self.routes)))
        services: list[trio.CancelScope] = []
        try:
            async with AsyncExitStack() as stack:
                with self._scope:
                    async with trio.open_nursery() as outer:

                        def start_service(fn: Callable[[], Awaitable[None]]) -> None:
                            scope = trio.CancelScope()
                            services.append(scope)
                            outer.start_soon(_service, scope, fn)

                        pool = EndpointPool(
                            batch_predicts=self.batch_predicts,
                            start_service=start_service,
                            client_options=self.client_options,
                        )
                        stack.push_async_callback(self._close_shared, pool)
                        if self.handle_sigint and _in_main_thread():
                            start_service(self._watch_sigint)
                        async with trio.open_nursery() as nursery:
                            # Started one at a time, in order: a route waiting for a
                            # concurrency slot holds up the ones behind it, so queued
                            # routes start in route order and never after a cancel.
                            for index, route in enumerate(self.routes):
                                await nursery.start(self._run_route, index, route, pool, limiter)
                        for scope in services:
                            scope.cancel()
        finally:
            self._wall = time.perf_counter() - self._started_at
        report = self.report()
        if self._interrupted:
            raise RunInterrupted(report)
        if self.on_failure == "cancel_siblings" and self._primary is not None:
            route_id, error = self._primary
            raise RunFailed(report, error, route_id) from error
        return report

    async def _watch_sigint(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self._interrupted = True
                self.cancel(INTERRUPTED)
                return

    async def _close_shared(self, pool: EndpointPool) -> None:
        # Every route has already released its adapter (bounded by its own close
        # timeout); after a failure or an interrupt, don't add a second full wait.
        bound = SHARED_CLOSE_AFTER_FAILURE if self._primary or self._interrupted else 5.0
        with trio.CancelScope(shield=True):
            for model in pool.owned_models:
                with trio.move_on_after(bound):
                    try:
                        await model.aclose()
                    except Exception as exc:  # cleanup never hides the run's outcome
                        log.warning("closing model client failed: %s", exc)

    async def _run_route(
        self,
        index: int,
        route: Route,
        pool: EndpointPool,
        limiter: trio.CapacityLimiter,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with limiter:
            task_status.started()
            await self._drive(self._slots[index], route, pool)

    async def _drive(self, slot: _Slot, route: Route, pool: EndpointPool) -> None:
        where = f"route {slot.route_id}"
        try:
            env = pool.env(route.env, where)
            model = pool.model(route.model, where)
        except RlmeshTrioError as exc:
            slot.status, slot.error = "failed", exc
            self._failed(slot.route_id, exc)
            return
        slot.env_label, slot.model_label = env.label, model.label
        spec = RouteSpec(
            route_id=slot.route_id,
            session_id=slot.route_id,
            max_episodes=route.episode_budget,
            close_env_on_end=route.close_env_on_end,
            limits=route.limits or Limits(),
            seeds=route.seeds,
            max_episode_steps=route.max_episode_steps,
            max_episode_seconds=route.max_episode_seconds,
            execution_horizon=route.execution_horizon,
            trial_index_base=route.trial_index_base,
        )

        def on_error(error: BaseException) -> None:
            # Known before the route's own bounded cleanup: siblings stop now.
            self._failed(slot.route_id, _name_endpoint(error, env.label, model.label))

        driver = RouteDriver(
            spec,
            env.env,
            model.model,
            hooks=self.hooks,
            cancel_reason=self._cancel_reason_now,
            on_error=on_error,
        )
        slot.driver = driver
        slot.started = time.perf_counter()
        try:
            slot.report = await driver.run()
            slot.status = "completed"
        except trio.Cancelled:
            slot.status = "cancelled"
            slot.error = driver.error or RouteCancelled(
                slot.route_id, driver.step, self._cancel_reason
            )
            slot.report = driver.report()
            raise
        except Exception as exc:
            error = _name_endpoint(exc, env.label, model.label)
            slot.status = "failed"
            slot.error = error
            slot.report = driver.report()
            self._failed(slot.route_id, error)
        finally:
            slot.ended = time.perf_counter()
            if env.owned:
                await _aclose(env.env, spec.limits.service_close_timeout)
            if model.owned:
                await _aclose(model.model, spec.limits.service_close_timeout)

    def _failed(self, route_id: str, error: BaseException) -> None:
        if self._primary is not None and self._primary[0] == route_id:
            return  # already reported through the driver's on_error
        log.warning("route %s failed: %s", route_id, error)
        if self._primary is None:
            self._primary = (route_id, error)
            if self.on_failure == "cancel_siblings":
                self.cancel(f"cancelled after sibling route {route_id} failed: {error}")


_CONNECT_OPS = {"env.connect": "env", "model.connect": "model"}


def _name_endpoint(error: BaseException, env_label: str, model_label: str) -> BaseException:
    """A connect timeout names the address it could not reach (as a ``ConnectError``)."""
    if isinstance(error, OperationTimeout) and error.operation in _CONNECT_OPS:
        label = env_label if _CONNECT_OPS[error.operation] == "env" else model_label
        named = ConnectError(
            label, f"no handshake within {format_duration(error.timeout)} ({error})"
        )
        named.__cause__ = error
        return named
    return error


async def _aclose(endpoint: Any, timeout: float) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(timeout):
        try:
            await endpoint.aclose()
        except Exception as exc:  # cleanup never hides the route's outcome
            log.warning("closing endpoint %r failed: %s", endpoint, exc)


async def _service(scope: trio.CancelScope, fn: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await fn()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


async def run_routes(
    routes: Sequence[Route],
    hooks: RuntimeHooks | None = None,
    on_failure: OnFailure = "cancel_siblings",
    max_concurrency: int | None = None,
    *,
    handle_sigint: bool = True,
    batch_predicts: bool = False,
) -> RunReport:
    """Run ``routes`` concurrently and return a :class:`RunReport`.

    Failure: with ``on_failure="cancel_siblings"`` (default) the first route
    error cancels every other route (each ends ``RouteCancelled`` naming the
    failed route) and :class:`~rlmesh_trio.RunFailed` is raised, carrying the
    full report (finished episodes are never lost) with the first error as
    its cause. With ``on_failure="isolate"`` failed routes are recorded and the
    rest carry on; the report is returned.

    Cancellation: if the caller's scope is cancelled, every route ends with
    ``RouteCancelled("cancelled by caller")``, every terminal close still runs
    (shielded, bounded by the route's service close timeout), and
    ``trio.Cancelled`` propagates. Ctrl+C (SIGINT, main thread only, unless
    ``handle_sigint=False``) cancels every route the same way and then raises
    :class:`RunInterrupted` (a ``KeyboardInterrupt``) with the partial report.

    ``batch_predicts=True`` coalesces the predicts of routes that share a model
    address into ``GroupedPredict`` round trips (see ``_batching``); results
    and per-route errors and timeouts are unchanged.

    No asyncio in sight: an asyncio loop for the gRPC clients is opened inside
    this call when needed.
    """
    orchestrator = Orchestrator(
        routes,
        hooks=hooks,
        on_failure=on_failure,
        max_concurrency=max_concurrency,
        handle_sigint=handle_sigint,
        batch_predicts=batch_predicts,
    )
    return await orchestrator.run()


def run(
    routes: Sequence[Route],
    hooks: RuntimeHooks | None = None,
    on_failure: OnFailure = "cancel_siblings",
    max_concurrency: int | None = None,
    *,
    batch_predicts: bool = False,
) -> RunReport:
    """:func:`run_routes` from synchronous code (starts its own Trio run)."""
    return trio.run(
        partial(
            run_routes,
            routes,
            hooks=hooks,
            on_failure=on_failure,
            max_concurrency=max_concurrency,
            batch_predicts=batch_predicts,
        )
    )
