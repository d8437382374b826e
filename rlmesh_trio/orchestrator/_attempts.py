"""One route's tickets across driver sessions: ledger writes, retries, the merged report.

A route runs its pending tickets (planned, not yet in the ledger) in one
driver session. When that session ends with an error a reconnect can cure
(see ``_retry``) and retries remain, the route waits out the backoff, makes
new endpoints (a new session: handshake, configure, resolve) and runs the
tickets still pending, so the interrupted ticket starts again from its reset
with the same seed. Each finished episode is written to the ledger by a hook
on episode end, synchronously, before it counts as done: the route's report
holds exactly the episodes the ledger holds (plus the ones it already had).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from .._errors import (
    ConnectError,
    ModelRpcError,
    OperationTimeout,
    RouteCancelled,
    format_duration,
)
from ..runtime import merge_telemetry
from ..runtime._driver import RouteDriver
from ..runtime._hooks import HookChain, RuntimeHooks
from ..runtime._results import EpisodeResult, RouteReport, SeriesSnapshot, record_id
from ..runtime._spec import Limits, RouteSpec
from ._durable import DurableRun
from ._endpoints import EndpointPool, ResolvedEnv, ResolvedModel
from ._endpoints import _env_label as env_label
from ._identity import contract_identity
from ._ledger import write_failure
from ._plan import Ticket
from ._retry import is_retriable
from ._route import Route, route_hooks
from ._route_hooks import SessionsAsOne, TicketHook
from ._tickets import IndexRuns, TicketSeq

__all__ = ["RouteRun", "aclose_endpoint", "name_endpoint"]

log = logging.getLogger("rlmesh_trio.orchestrator")

_CONNECT_OPS = {"env.connect": "env", "model.connect": "model"}


def name_endpoint(error: BaseException, env_label: str, model_label: str) -> BaseException:
    """A connect timeout names the address it could not reach (as a ``ConnectError``)."""
    if isinstance(error, OperationTimeout) and error.operation in _CONNECT_OPS:
        label = env_label if _CONNECT_OPS[error.operation] == "env" else model_label
        named = ConnectError(
            label, f"no handshake within {format_duration(error.timeout)} ({error})"
        )
        named.__cause__ = error
        return named
    return error


async def aclose_endpoint(endpoint: Any, timeout: float) -> None:
    """Close an endpoint we made, shielded and bounded by ``timeout``; failures are logged."""
    with trio.CancelScope(shield=True), trio.move_on_after(timeout):
        try:
            await endpoint.aclose()
        except Exception as exc:  # cleanup never hides the route's outcome
            log.warning("closing endpoint %r failed: %s", endpoint, exc)


def _label(value: Any) -> str:
    if isinstance(value, str):
        return value
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else env_label(value)


def _model_broke(error: BaseException, model_label: str) -> bool:
    """Whether ``error`` says the (shared) model connection is gone or unreachable."""
    if isinstance(error, ModelRpcError):
        return is_retriable(error)
    return isinstance(error, ConnectError) and error.address == model_label


def _merge_samples(
    reports: Sequence[RouteReport],
) -> dict[tuple[str, str, str], SeriesSnapshot]:
    merged: dict[tuple[str, str, str], SeriesSnapshot] = {}
    for report in reports:
        for key, (count, total, samples) in report.samples.items():
            c, t, s = merged.get(key, (0, 0.0, ()))
            merged[key] = (c + count, t + total, s + samples)
    return merged


def _indices(tickets: Sequence[Ticket]) -> IndexRuns:
    """The tickets' episode indices (without making the tickets of a :class:`TicketSeq`)."""
    if isinstance(tickets, TicketSeq):
        return tickets.indices
    return IndexRuns.of(t.index for t in tickets)


def _trials(tickets: Sequence[Ticket]) -> Sequence[int]:
    """One trial per ticket: a ``range`` for a contiguous run (no per-episode tuple)."""
    if isinstance(tickets, TicketSeq):
        return tickets.trials()
    return tuple(t.trial for t in tickets)


@attrs.define(eq=False)
class RouteContext:
    """What a route run needs from its orchestrator."""

    pool: EndpointPool
    durable: DurableRun
    hooks: RuntimeHooks | None
    cancel_reason: Callable[[], str]
    failed: Callable[[str, BaseException], None]
    labels: Callable[[str, str], None]


class RouteRun:
    """One route's sessions; ``report()``, ``step`` and ``error`` read like a driver's.

    Cancellation: a cancel while a session runs ends it as the driver does
    (``RouteCancelled`` in ``error``, ``trio.Cancelled`` re-raised); a cancel
    during a backoff wait ends the route the same way. Endpoints this run made
    are closed after each session, shielded and bounded.
    """

    def __init__(self, route_id: str, route: Route, ctx: RouteContext) -> None:
        self.route_id = route_id
        self.route = route
        self.ctx = ctx
        self.queue = ctx.durable.queue(route_id)
        self.results: dict[int, EpisodeResult] = ctx.durable.finished(route_id)
        self.resumed = len(self.results)
        self.resumed_steps = sum(ep.steps for ep in self.results.values())
        self.retries = 0
        self.reports: list[RouteReport] = []
        self.error: BaseException | None = None
        self._live: RouteDriver | None = None
        self._scope: trio.CancelScope | None = None
        self._write_error: BaseException | None = None
        self._contract: dict[str, str] | None = None
        self._rng = random.Random(f"{route_id}:{ctx.durable.plan.digest}")
        # Labels before any session: a route the ledger already finished runs none.
        ctx.labels(_label(route.env), _label(route.model))
        self._started: set[int] = set()
        self._user_hooks = SessionsAsOne(ctx.hooks, self.results) if ctx.hooks is not None else None
        # Retries that earlier runs spent on the episodes the ledger already holds.
        self.resumed_retries = sum(ep.attempts - 1 for ep in self.results.values())

    # -- what a slot reads ---------------------------------------------------
    @property
    def step(self) -> int:
        live = self._live.step if self._live is not None else 0
        return sum(r.total_steps for r in self.reports) + live

    def report(self) -> RouteReport:
        """Every episode of the route so far (ledger, finished sessions, the running one)."""
        reports = list(self.reports)
        if self._live is not None:
            reports.append(self._live.report())
        if self.queue is None and len(reports) == 1:
            return reports[0]  # unplanned route: the driver's own report, as ever
        episodes = self._episodes(reports)
        first = reports[0] if reports else None
        return RouteReport(
            route_id=self.route_id,
            session_id=first.session_id if first else self.route_id,
            env_id=first.env_id if first else "",
            total_steps=self.resumed_steps + sum(r.total_steps for r in reports),
            total_episodes=len(episodes),
            episodes=episodes,
            telemetry=merge_telemetry(reports),
            samples=_merge_samples(reports),
        )

    def _episodes(self, reports: Sequence[RouteReport]) -> tuple[EpisodeResult, ...]:
        if self.queue is None:
            return tuple(ep for r in reports for ep in r.episodes)
        return tuple(self.results[i] for i in sorted(self.results))

    # -- running -------------------------------------------------------------
    async def run(self) -> RouteReport:
        """Run the route's tickets (claimed from its queue) to the end, retrying sessions.

        A session that fails gives back the tickets it did not finish before
        the retry's backoff, and the route claims again afterwards: in a
        ticket pool the other routes run them meanwhile.

        Raises:
            The last session's route error once retries are spent (or at once
            for an error no retry can cure); ``LedgerError`` when the ledger
            cannot be written. ``trio.Cancelled`` when cancelled.
        """
        try:
            if self.queue is None:
                while not await self._attempt(None):
                    pass
            else:
                while batch := await self.queue.next_claim():
                    await self._attempt(batch)
        finally:
            if self._user_hooks is not None:
                close = (self.route.limits or Limits()).service_close_timeout
                await self._user_hooks.flush(self.step, self.report().total_episodes, close)
        self.error = None
        return self.report()

    async def _attempt(self, batch: Sequence[Ticket] | None) -> bool:
        """One session over ``batch`` (``None``: unplanned); False when it is to be retried.

        Whatever the session did not finish goes back to the queue.
        """
        before = len(self.results)
        try:
            await self._session(batch)
        except trio.Cancelled:
            self._give_back(batch)
            raise
        except Exception as exc:
            self._give_back(batch)
            self.error = exc
            if not self._will_retry(exc):
                raise
            await self._before_retry(exc, batch)
            return False
        if self._give_back(batch) and len(self.results) == before:
            # The driver ends a session only after its budget; this would loop forever.
            raise RuntimeError(f"route {self.route_id}: a session ended without finishing")
        return True

    def _give_back(self, batch: Sequence[Ticket] | None) -> bool:
        """Return ``batch``'s unfinished tickets to the queue; whether there were any."""
        if batch is None or self.queue is None:
            return False
        left = _indices(batch).without(self.results)
        self.queue.release(left)
        return bool(left)

    def _will_retry(self, error: BaseException) -> bool:
        return (
            self._write_error is None
            and self.retries < self.ctx.durable.policy.retries
            and is_retriable(error)
        )

    async def _before_retry(self, error: BaseException, pending: Sequence[Ticket] | None) -> None:
        self.retries += 1
        failures = self.queue.failures if self.queue is not None else {}
        for index in self._interrupted(error, pending):
            failures[index] = failures.get(index, 0) + 1
        delay = self.ctx.durable.policy.delay(self.retries, self._rng)
        log.info(
            "route %s: retry %d of %d in %.2fs after: %s",
            self.route_id,
            self.retries,
            self.ctx.durable.policy.retries,
            delay,
            error,
        )
        try:
            if self._user_hooks is not None:
                await self._user_hooks.retrying(
                    f"retry {self.retries} of {self.ctx.durable.policy.retries} in {delay:.2f}s "
                    f"after: {type(error).__name__}: {error}"
                )
            await trio.sleep(delay)
        except trio.Cancelled:
            self.error = RouteCancelled(self.route_id, self.step, self.ctx.cancel_reason())
            raise

    def _interrupted(self, error: BaseException, pending: Sequence[Ticket] | None) -> set[int]:
        """Ticket indices the failed session had started and not finished."""
        if pending is None:
            return set()
        left = _indices(pending).without(self.results)
        found = {pending[i].index for i in self._started if i < len(pending)}
        found = {index for index in found if index in left}
        if not found and left and not isinstance(error, ConnectError):
            found.add(left[0])  # failed inside its reset, before it was announced
        return found

    async def _session(self, pending: Sequence[Ticket] | None) -> None:
        route, where = self.route, f"route {self.route_id}"
        env = self.ctx.pool.env(route.env, where)
        try:
            model = self.ctx.pool.model(route.model, where)
        except BaseException:
            if env.owned:
                await aclose_endpoint(env.env, (route.limits or Limits()).service_close_timeout)
            raise
        self.ctx.labels(env.label, model.label)
        spec = self._spec(pending)
        hook = TicketHook(pending or (), self._record, self._check_contract)
        self._started = hook.started
        hooks: RuntimeHooks = hook
        if self._user_hooks is not None:
            self._user_hooks.session = hook if pending is not None else None
            hooks = HookChain([hook, self._user_hooks])
        seat = self.ctx.pool.fused_seat(route.model, model.model)
        driver = RouteDriver(
            spec,
            env.env,
            model.model,
            hooks=route_hooks(hooks if pending is not None else self._user_hooks, route, env.env),
            cancel_reason=self.ctx.cancel_reason,
            on_error=lambda error: self._on_error(error, env, model),
            fused=seat,
        )
        self._live = driver
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                await driver.run()
        except Exception as exc:
            named = name_endpoint(exc, env.label, model.label)
            if _model_broke(named, model.label):
                self.ctx.pool.renew_model(route.model, model.model)
            if named is exc:
                raise
            raise named from exc
        except trio.Cancelled:
            self.error = driver.error
            raise
        finally:
            if seat is not None:
                seat.release()
            self._scope = None
            self._live = None
            self.reports.append(driver.report())
            await self._close(env, model, spec.limits.service_close_timeout)
        if self._write_error is not None:
            raise self._write_error

    def _on_error(self, error: BaseException, env: ResolvedEnv, model: ResolvedModel) -> None:
        # Known before the session's bounded cleanup: siblings stop now, unless we retry.
        named = name_endpoint(error, env.label, model.label)
        if not self._will_retry(named):
            self.ctx.failed(self.route_id, named)

    async def _close(self, env: ResolvedEnv, model: ResolvedModel, timeout: float) -> None:
        # Both at once, under one bound: the route's terminal close never outlasts it.
        owned = [e for e, mine in ((env.env, env.owned), (model.model, model.owned)) if mine]
        with trio.CancelScope(shield=True), trio.move_on_after(timeout):
            if len(owned) == 1:
                await aclose_endpoint(owned[0], timeout)  # one: no nursery and task for it
            elif owned:
                async with trio.open_nursery() as nursery:
                    for endpoint in owned:
                        nursery.start_soon(aclose_endpoint, endpoint, timeout)

    def _spec(self, pending: Sequence[Ticket] | None) -> RouteSpec:
        route = self.route
        return RouteSpec(
            route_id=self.route_id,
            session_id=self.route_id,
            max_episodes=len(pending) if pending is not None else route.episode_budget,
            close_env_on_end=route.close_env_on_end,
            limits=route.limits or Limits(),
            seeds=tuple(t.seed for t in pending or ()) if route.seeds is not None else None,
            max_episode_steps=route.max_episode_steps,
            max_episode_seconds=route.max_episode_seconds,
            execution_horizon=route.execution_horizon,
            # Only an explicit base is the user's: a dealt one travels in ``trials``
            # (so an env owning its resets is refused only for what was asked).
            trial_index_base=route.trial_index_base or 0,
            trials=_trials(pending) if pending is not None else None,
        )

    # -- recording -----------------------------------------------------------
    @property
    def env_contract(self) -> Mapping[str, str] | None:
        """The env contract the route's episodes ran against: this process's last session's,
        else (a route the ledger had already finished) the ledger's."""
        if self._contract is not None:
            return self._contract
        return self.ctx.durable.known_contract(self.route_id)

    def _check_contract(self) -> None:
        """On a session's first episode: the env must be the one the ledger's episodes saw."""
        driver = self._live
        if driver is None or driver.contract is None:
            return
        self._contract = contract_identity(driver.contract)  # the report names it too
        if not self.ctx.durable.checks_contracts:
            return
        mismatch = self.ctx.durable.check_contract(self.route_id, self._contract)
        if mismatch is not None and self._write_error is None:
            # Nothing of this env may reach the ledger: end the session; the route fails.
            self._write_error = mismatch
            if self._scope is not None:
                self._scope.cancel()

    def _record(self, ticket: Ticket, result: EpisodeResult) -> None:
        if self._write_error is not None:
            return
        result = attrs.evolve(
            result,
            index=ticket.index,
            record_id=record_id(ticket.index),
            attempts=1
            + (self.queue.failures.get(ticket.index, 0) if self.queue is not None else 0),
        )
        writer = self.ctx.durable.writer
        if writer is not None:
            try:
                writer.write_episode(ticket, result, self._contract)
            except OSError as exc:
                # Not on disk, so not done: end the session; the route fails with this.
                self._write_error = write_failure(writer.path, exc)
                if self._scope is not None:
                    self._scope.cancel()
                return
        self.results[ticket.index] = result
