"""The shard side: run a :class:`ShardWork` with our orchestrator on Trio, streaming items out.

A backend calls :func:`run_shard` on whatever thread or process hosts the
shard; ``emit`` receives items in order (episodes as they finish, then one
:class:`RouteEnded` per route, then :class:`ShardEnded`), and ``on_started``
gets a ``cancel(reason)`` callable that is safe to call from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

import attrs
import trio

from ..orchestrator._run import Orchestrator
from ..report._outcome import RouteOutcome
from ..report._report import RunFailed, RunReport
from ..runtime._events import (
    EpisodeCompletedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from ..runtime._hooks import RuntimeHooks
from ._work import EpisodeDone, HookCall, Item, RouteEnded, ShardEnded, ShardWork

__all__ = ["run_shard"]

Emit = Callable[[Item], None]
Cancel = Callable[[str], None]


class _Streamer(RuntimeHooks):
    """Emits each finished episode at once, renumbered to its planned index (a ticket
    pool's episodes already carry theirs: its routes travel whole)."""

    def __init__(
        self, work: ShardWork, emit: Emit, contracts: Mapping[str, Mapping[str, str]]
    ) -> None:
        self._emit = emit
        self._indices = {part.route_id: part.indices for part in work.parts if part.owed is None}
        self._owners = {p.route_id: p.route.ticket_pool or p.route_id for p in work.parts}
        #: Filled by the orchestrator as each entry's first session meets its env.
        self._contracts = contracts

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        result = event.result
        contract = self._contracts.get(self._owners[event.route_id])
        indices = self._indices.get(event.route_id)
        if indices is None:
            self._emit(EpisodeDone(event.route_id, result, event, contract))
            return
        planned = indices[result.index]
        trial = result.trial
        if trial is not None:
            # The part's trial base sits at its first owed episode: shift back to the plan's.
            trial = trial - result.index - indices[0] + planned
        result = attrs.evolve(result, index=planned, trial=trial)
        event = attrs.evolve(event, episode_index=planned, result=result)
        self._emit(EpisodeDone(event.route_id, result, event, contract))

    async def session_started(self, event: SessionStartedEvent) -> None:
        self._emit(HookCall("session_started", event))

    async def session_ended(self, event: SessionEndedEvent) -> None:
        self._emit(HookCall("session_ended", event))

    async def session_failed(self, event: SessionFailedEvent) -> None:
        self._emit(HookCall("session_failed", event))


def _ended(outcome: RouteOutcome) -> RouteEnded:
    report = outcome.report
    if report is not None:
        report = attrs.evolve(report, episodes=())
    return RouteEnded(
        route_id=outcome.route_id,
        status=outcome.status,
        error=outcome.error,
        env=outcome.env,
        model=outcome.model,
        wall_s=outcome.wall_s,
        report=report,
        retries=outcome.retries,
        env_contract=outcome.env_contract,
    )


async def _run(work: ShardWork, emit: Emit, on_started: Callable[[Cancel], None]) -> None:
    contracts = None if work.contracts is None else dict(work.contracts)
    orchestrator = Orchestrator(
        [part.route for part in work.parts],
        hooks=_Streamer(work, emit, {} if contracts is None else contracts),
        options=work.options,
        handle_sigint=False,
        trial_bases={p.route_id: p.trial_base for p in work.parts if p.trial_base is not None},
    )
    pools = {p.route.ticket_pool: p.owed for p in work.parts if p.owed is not None}
    orchestrator.as_shard({str(name): owed for name, owed in pools.items()}, contracts)
    token = trio.lowlevel.current_trio_token()

    def cancel(reason: str) -> None:
        try:
            token.run_sync_soon(orchestrator.cancel, reason)
        except trio.RunFinishedError:
            pass  # the shard is over already

    on_started(cancel)
    report: RunReport
    try:
        report = await orchestrator.run()
    except RunFailed as failed:
        report = failed.report
    for outcome in report.routes:
        emit(_ended(outcome))
    emit(ShardEnded(work.shard_id))


def run_shard(work: ShardWork, emit: Emit, on_started: Callable[[Cancel], None]) -> None:
    """Run ``work`` to its end on a fresh Trio run in the calling thread.

    Cancellation: ``cancel(reason)`` (handed to ``on_started``) cancels every
    route; each ends ``RouteCancelled`` with that reason after its bounded
    cleanup, and the stream still ends with their :class:`RouteEnded` items.
    """
    trio.run(partial(_run, work, emit, on_started))
