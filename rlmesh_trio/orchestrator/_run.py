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
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from functools import partial
from typing import Any, Unpack

import trio

from .._errors import (
    InvalidSpec,
    RouteCancelled,
    rebuild_exception,
)
from .._signals import RUN_SIGNALS
from ..report._report import RunFailed, RunReport
from ..runtime._hooks import RuntimeHooks, as_runtime_hooks
from ._attempts import RouteContext, RouteRun
from ._checks import check_distinct_env_objects
from ._durable import prepare_durable
from ._endpoints import EndpointPool
from ._entry import require_no_running_loop, require_trio_run
from ._notebook import in_notebook, run_on_worker_thread
from ._options import (
    UNSET,
    KeywordSettings,
    OnFailure,
    RunOptions,
    RunSettings,
    Unset,
    settle_options,
)
from ._plan import make_plan
from ._pool import EnvGate
from ._route import Route
from ._slot import Slot as _Slot
from ._tickets import IndexRuns

__all__ = ["Orchestrator", "RunInterrupted", "run", "run_routes"]

log = logging.getLogger("rlmesh_trio.orchestrator")

CALLER_CANCELLED = "cancelled by caller"
INTERRUPTED = "interrupted by the user (SIGINT / KeyboardInterrupt)"
#: Seconds left for closing shared model clients once a run failed or was interrupted.
SHARED_CLOSE_AFTER_FAILURE = 0.25


class RunInterrupted(KeyboardInterrupt):
    """Ctrl+C stopped a run; ``report`` holds the partial report (every finished episode)."""

    def __init__(self, report: RunReport) -> None:
        super().__init__("run interrupted")
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuild_exception, (type(self), self.args, dict(self.__dict__)))


class Orchestrator:
    """Runs a set of routes once; :meth:`report` is available at any time (partial while running).

    Most callers want :func:`run_routes` or :func:`run`; the CLI uses this class
    so it can write a partial report when interrupted. How the routes run is
    ``options`` (a :class:`RunOptions`), each keyword in ``settings`` (any
    ``RunOptions`` field: ``on_failure=``, ``ledger=``, ``retries=``, ...)
    overriding its field; ``self.options`` is the result.

    Three arguments say where this run sits rather than how it runs, so they are
    not ``RunOptions`` fields: ``argv`` is recorded in the report and ledger
    (default ``sys.argv``); ``trial_bases`` (route id -> first trial) overrides
    the dealt trial base of routes without their own ``trial_index_base`` (a
    shard of a distributed run gets the bases the coordinator dealt over the
    whole run); ``ledger_route_ends=True`` also writes a ``route`` line when each
    route stops (status and error message), for ``rlmesh-trio watch``.

    Raises:
        InvalidSpec: a bad option (see :class:`RunOptions`), ``options`` not a
            ``RunOptions``, ``hooks`` that are not hooks, or a bad route (not a
            ``Route``, a duplicate id, one env object in two routes, a route id
            that is also a ticket pool's); ``LedgerExists`` for a non-empty
            ledger without ``resume`` (the file untouched); ``PlanMismatch`` for
            a ledger of another plan; ``LedgerError`` for a corrupt, unreadable or
            unwritable one.
        TypeError: a keyword that is no ``RunOptions`` field.
    """

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        hooks: RuntimeHooks | None = None,
        options: RunOptions | None = None,
        argv: Sequence[str] | None = None,
        trial_bases: Mapping[str, int] | None = None,
        ledger_route_ends: bool = False,
        **settings: Unpack[RunSettings],
    ) -> None:
        #: The settings this run runs with (``options`` with every keyword applied).
        self.options = settle_options(options, **settings)
        routes = list(routes)
        for i, route in enumerate(routes):
            if not isinstance(route, Route):
                raise InvalidSpec(f"routes[{i}] is a {type(route).__name__}, not a Route")
        ids = [route.route_id or f"route-{i}" for i, route in enumerate(routes)]
        duplicates = sorted({rid for rid in ids if ids.count(rid) > 1})
        if duplicates:
            raise InvalidSpec(f"duplicate route ids: {', '.join(duplicates)}")
        check_distinct_env_objects(routes, ids)
        self.routes = routes
        self.hooks = as_runtime_hooks(hooks) if hooks is not None else None
        #: Called with the report so far when a second SIGINT arrives while the first
        #: one's cancellation is still cleaning up (the CLI writes the partial report
        #: and exits); ``None``: the second SIGINT is Trio's ``KeyboardInterrupt``.
        self.on_second_interrupt: Callable[[RunReport], None] | None = None
        self._slots = [_Slot(rid) for rid in ids]
        self._durable = prepare_durable(make_plan(routes, ids, trial_bases), self.options, argv)
        self._gate = EnvGate()
        self._cancel_reason = CALLER_CANCELLED
        self._primary: tuple[str, BaseException] | None = None
        self._failures_seen: set[str] = set()  # each failing route is logged once
        self._started_at: float | None = None
        self._wall: float | None = None
        self._interrupted = False
        self._scope = trio.CancelScope()
        self._ledger_route_ends = ledger_route_ends

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
            routes=tuple(slot.outcome(self._cancel_reason) for slot in self._slots),
            wall_s=wall,
            meta=self._durable.meta,
            resumed_steps=sum(s.driver.resumed_steps for s in self._slots if s.driver),
        )

    def cancel(self, reason: str = CALLER_CANCELLED) -> None:
        """Cancel every route; each ends with ``RouteCancelled`` carrying ``reason``."""
        self._cancel_reason = reason
        self._scope.cancel()

    def as_shard(self, owed: Mapping[str, IndexRuns], contracts: dict[str, Any] | None) -> None:
        """Set up as a distributed shard, before :meth:`run` (see ``DurableRun.as_shard``)."""
        self._durable.as_shard(owed, contracts)

    def _cancel_reason_now(self) -> str:
        return self._cancel_reason

    # -- running ---------------------------------------------------------------
    async def run(self) -> RunReport:
        """Run every route; see :func:`run_routes` for the failure and cancellation contract."""
        require_trio_run()

        self._started_at = time.perf_counter()
        limiter = trio.CapacityLimiter(self.options.max_concurrency or max(1, len(self.routes)))
        services: list[trio.CancelScope] = []
        writer = self._durable.open()
        try:
            async with AsyncExitStack() as stack:
                with self._scope:
                    async with trio.open_nursery() as outer:

                        def start_service(
                            fn: Callable[[], Awaitable[None]], *, shield: bool = False
                        ) -> None:
                            scope = trio.CancelScope(shield=shield)
                            services.append(scope)
                            outer.start_soon(_service, scope, fn)

                        pool = EndpointPool(
                            batch_predicts=self.options.batch_predicts is True,
                            fuse=self._fuses(),
                            start_service=start_service,
                            client_options=self.options.client_options,
                        )
                        stack.push_async_callback(self._close_shared, pool)
                        if writer is not None:
                            start_service(writer.sync_forever)
                        if self.options.handle_sigint and _in_main_thread():
                            # Shielded: it must hear a second SIGINT during the cleanup
                            # that the first one's cancellation started.
                            start_service(self._watch_sigint, shield=True)
                        try:
                            async with trio.open_nursery() as nursery:
                                # Started one at a time, in order: a route waiting for a
                                # concurrency slot holds up the ones behind it, so queued
                                # routes start in route order and never after a cancel.
                                for index, route in enumerate(self.routes):
                                    await nursery.start(
                                        self._run_route, index, route, pool, limiter
                                    )
                        finally:
                            for scope in services:
                                scope.cancel()
        finally:
            self._wall = time.perf_counter() - self._started_at
            self._durable.close()
        report = self.report()
        if self._interrupted:
            raise RunInterrupted(report)
        if self.options.on_failure == "cancel_siblings" and self._primary is not None:
            route_id, error = self._primary
            raise RunFailed(report, error, route_id) from error
        return report

    def _fuses(self) -> bool:
        """Whether routes sharing an in-process policy run as one fused block: unless
        ``batch_predicts=False``; only when a failure cancels the siblings and no
        route is retried (a block cannot let one route go on or start it again)."""
        options = self.options
        if options.batch_predicts is False or options.on_failure != "cancel_siblings":
            return False
        return options.retries == 0

    async def _watch_sigint(self) -> None:
        with trio.open_signal_receiver(*RUN_SIGNALS) as signals:
            async for _signum in signals:
                if self._interrupted:  # the second SIGINT, during the cleanup
                    if self.on_second_interrupt is not None:
                        self.on_second_interrupt(self.report())
                    return
                self._interrupted = True
                self.cancel(INTERRUPTED)
                if self.on_second_interrupt is None:
                    return  # a second SIGINT is then Trio's KeyboardInterrupt, as before

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
            # Routes sharing an env endpoint take turns on it (issue 12 item 4).
            async with self._gate.hold(route.env):
                await self._drive(self._slots[index], route, pool)

    async def _drive(self, slot: _Slot, route: Route, pool: EndpointPool) -> None:
        def labels(env_label: str, model_label: str) -> None:
            slot.env_label, slot.model_label = env_label, model_label

        context = RouteContext(
            pool=pool,
            durable=self._durable,
            hooks=self.hooks,
            cancel_reason=self._cancel_reason_now,
            failed=self._failed,
            labels=labels,
        )
        runner = RouteRun(slot.route_id, route, context)
        slot.driver = runner
        slot.started = time.perf_counter()
        try:
            slot.report = await runner.run()
            slot.status = "completed"
        except trio.Cancelled:
            slot.status = "cancelled"
            slot.error = runner.error or RouteCancelled(
                slot.route_id, runner.step, self._cancel_reason
            )
            slot.report = runner.report()
            raise
        except Exception as exc:
            slot.status = "failed"
            slot.error = exc
            slot.report = runner.report()
            self._failed(slot.route_id, exc)
        finally:
            slot.ended = time.perf_counter()
            self._record_end(slot)

    def _record_end(self, slot: _Slot) -> None:
        """The route's end in the ledger, for a watcher (best-effort: a failed write is logged)."""
        writer = self._durable.writer
        if writer is None or not self._ledger_route_ends:
            return
        try:
            writer.write_route_end(slot.route_id, slot.status or "cancelled", slot.error)
        except OSError as exc:
            log.warning("route %s: ledger: cannot record its end: %s", slot.route_id, exc)

    def _failed(self, route_id: str, error: BaseException) -> None:
        if route_id in self._failures_seen:
            return  # already reported through the driver's on_error
        self._failures_seen.add(route_id)
        log.warning("route %s failed: %s", route_id, error)
        if self._primary is None:
            self._primary = (route_id, error)
            if self.options.on_failure == "cancel_siblings":
                self.cancel(f"cancelled after sibling route {route_id} failed: {error}")


async def _service(scope: trio.CancelScope, fn: Callable[[], Awaitable[None]]) -> None:
    with scope:
        await fn()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


async def run_routes(
    routes: Sequence[Route],
    hooks: RuntimeHooks | None = None,
    on_failure: OnFailure | Unset = UNSET,
    max_concurrency: int | Unset | None = UNSET,
    *,
    options: RunOptions | None = None,
    **settings: Unpack[KeywordSettings],
) -> RunReport:
    """Run ``routes`` concurrently and return a :class:`RunReport`.

    How they run is ``options`` (a :class:`RunOptions`, which documents every
    setting and its default); ``on_failure``, ``max_concurrency`` and every other
    ``RunOptions`` field given as a keyword (``batch_predicts=True``,
    ``ledger=PATH``, ...) override its field. ``hooks``: a ``RuntimeHooks``
    (``HookChain`` for several) or any object with ``async def`` hook methods;
    anything else is refused.

    Failure: with ``on_failure="cancel_siblings"`` (default) the first route
    error cancels every other route (each ends ``RouteCancelled`` naming the
    failed route) and :class:`~rlmesh_trio.RunFailed` is raised, carrying the
    full report (finished episodes are never lost) with the first error as
    its cause. With ``on_failure="isolate"`` failed routes are recorded and the
    rest carry on; the report is returned. A retried failure (``retries=``)
    cancels nothing.

    Cancellation: if the caller's scope is cancelled, every route ends with
    ``RouteCancelled("cancelled by caller")``, every terminal close still runs
    (shielded, bounded by the route's service close timeout), and
    ``trio.Cancelled`` propagates. Ctrl+C (SIGINT, main thread only, unless
    ``handle_sigint=False``) cancels every route the same way and then raises
    :class:`RunInterrupted` (a ``KeyboardInterrupt``) with the partial report.

    Raises:
        InvalidSpec: before any route starts: a bad option (``on_failure``,
            ``max_concurrency`` < 1, ``retries``/``retry_backoff`` < 0, ``resume``
            without ``ledger``, an unknown ``client_options`` key; see
            :class:`RunOptions`), ``options`` not a ``RunOptions``, ``hooks``
            that are not hooks, or a bad route (not a ``Route``, a duplicate id,
            one env object in two routes, a route id that is also a ticket
            pool's, routes of one ticket pool that disagree). Its ledger kinds:
            ``LedgerExists`` (a non-empty ledger without ``resume``; the file
            untouched), ``PlanMismatch`` (a ledger of another plan),
            ``LedgerError`` (a ledger unreadable, corrupt, not writable or held
            by another run).
        TypeError: a keyword that is no ``RunOptions`` field.
        WrongEventLoop: awaited outside a Trio run (e.g. under asyncio).
        RunFailed: a route failed under ``on_failure="cancel_siblings"``; the
            first error is its ``__cause__`` (``LedgerError`` if an episode could
            not be written to the ledger).
        RunInterrupted: Ctrl+C, as above (a second Ctrl+C during that cleanup
            is Trio's ``KeyboardInterrupt``).
        trio.Cancelled: the caller's scope was cancelled.
    """
    settled = settle_options(options, on_failure, max_concurrency, **settings)
    return await Orchestrator(routes, hooks=hooks, options=settled).run()


def run(
    routes: Sequence[Route],
    hooks: RuntimeHooks | None = None,
    on_failure: OnFailure | Unset = UNSET,
    max_concurrency: int | Unset | None = UNSET,
    *,
    options: RunOptions | None = None,
    **settings: Unpack[KeywordSettings],
) -> RunReport:
    """:func:`run_routes` from synchronous code (starts its own Trio run); the same
    arguments (``options``, and any ``RunOptions`` field as a keyword).

    In a notebook (a Jupyter kernel, whose asyncio loop runs every cell) the run
    goes to a worker thread and the cell blocks until it ends; "interrupt
    kernel" cancels every route and raises :class:`RunInterrupted` with the
    partial report. Elsewhere inside a running loop it is refused.

    Raises:
        InvalidSpec: a bad option or route, or a ledger refused (``LedgerExists``,
            ``PlanMismatch``, ``LedgerError``), as for :func:`run_routes`; before
            any route starts.
        TypeError: a keyword that is no ``RunOptions`` field.
        WrongEventLoop: called inside a running Trio run, or an asyncio loop
            outside a notebook (there use ``await asyncio.to_thread(rt.run, ...)``).
        RunFailed: a route failed under ``on_failure="cancel_siblings"`` (the
            first error is its ``__cause__``).
        RunInterrupted: Ctrl+C in the main thread (or "interrupt kernel" in a
            notebook), with the partial report.
    """
    settled = settle_options(options, on_failure, max_concurrency, **settings)
    if in_notebook():
        orchestrator = Orchestrator(routes, hooks=hooks, options=settled)
        report, interrupted = run_on_worker_thread(orchestrator, INTERRUPTED)
        if interrupted:
            raise RunInterrupted(report)
        return report
    require_no_running_loop()
    return trio.run(partial(run_routes, routes, hooks, options=settled))
