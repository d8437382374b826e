"""The coordinator: deals a run's routes to shards, keeps every ticket once, replays lost ones.

It runs on the caller's machine, under its own Trio run. Each shard's stream
is read on a worker thread and handed to the Trio thread batch by batch, so
the book (and the ledger, its single writer) is only ever touched from one
place. A shard that dies has its routes' owed tickets dealt to a new shard,
with the same seeds and trials, up to ``max_shard_attempts``; a route that
runs out of attempts fails with :class:`~rlmesh_trio.ShardLost`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence

import attrs
import trio

from .._errors import RouteCancelled, ShardLost
from .._signals import RUN_SIGNALS, wait_for_signal
from ..orchestrator import Route, RunFailed, RunInterrupted, RunReport
from ..orchestrator._durable import DurableRun
from ..orchestrator._ledger import LedgerError
from ..orchestrator._plan import deal_trial_bases
from ..orchestrator._tickets import IndexRuns
from ..runtime import EpisodeResult, RuntimeHooks
from ._backends import Backend, ShardDied
from ._planner import owed_part, plan_shards, pool_part
from ._state import books_of, merged_report
from ._work import EpisodeDone, HookCall, Item, RouteEnded, RoutePart, RunOptions, ShardWork

__all__ = ["Coordinator"]

log = logging.getLogger("rlmesh_trio.distributed")

INTERRUPTED = "interrupted by the user (SIGINT / KeyboardInterrupt)"


class Coordinator:
    """Runs routes over a backend's shards and merges one :class:`RunReport`."""

    def __init__(
        self,
        routes: Sequence[Route],
        backend: Backend,
        *,
        shards: int,
        options: RunOptions,
        max_shard_attempts: int = 3,
        handle_sigint: bool = True,
        durable: DurableRun | None = None,
        hooks: RuntimeHooks | None = None,
    ) -> None:
        self.routes = list(routes)
        self.backend = backend
        self.shards = shards
        self.options = options
        self.max_shard_attempts = max_shard_attempts
        self.handle_sigint = handle_sigint
        self.durable = durable
        self.hooks = hooks
        self.books = books_of(self.routes)
        # Trials are dealt over the whole run here, not per shard (each shard plans alone).
        ids = [str(r.route_id) for r in self.routes]
        self.trial_bases = deal_trial_bases(self.routes, ids)
        if durable is not None:
            for route_id, book in self.books.items():
                book.resume(durable.finished(route_id))
        for book in self.books.values():
            if book.planned and not book.owed:
                book.end("completed")  # a resumed route (or pool) the ledger finished
        self._handles: dict[str, object] = {}
        self._live = 0
        self._serial = 0
        self._cancel_reason: str | None = None
        self._primary: tuple[str, BaseException] | None = None
        self._interrupted = False
        self._all_ended = trio.Event()

    async def run(self) -> RunReport:
        """Run every route to its end and return the merged report.

        Raises:
            RunFailed: a route failed under ``cancel_siblings`` (the report is on it).
            RunInterrupted: Ctrl+C cancelled every shard (the partial report is on it).
        """
        started = time.perf_counter()
        writer = self.durable.open() if self.durable is not None else None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if writer is not None:
                    nursery.start_soon(writer.sync_forever)
                if self.handle_sigint and threading.current_thread() is threading.main_thread():
                    nursery.start_soon(self._watch_sigint)
                self._launch_owed()
                await self._all_ended.wait()
                nursery.cancel_scope.cancel()
        finally:
            if self.durable is not None:
                self.durable.close()
        report = self._report(time.perf_counter() - started)
        if self._interrupted:
            raise RunInterrupted(report)
        if self.options.on_failure == "cancel_siblings" and self._primary is not None:
            route_id, error = self._primary
            raise RunFailed(report, error, route_id) from error
        return report

    def _launch_owed(self) -> None:
        """Deal every route with owed tickets into shards (a resumed route may owe none)."""
        owing = [book.route for book in self.books.values() if not book.ended]
        groups = plan_shards(owing, self.shards, batch_predicts=self.options.batch_predicts is True)
        for group in groups:
            self._launch(tuple(self._part(r, self.books[str(r.route_id)].owed) for r in group), 1)
        if not groups:
            self._all_ended.set()

    def _report(self, wall_s: float) -> RunReport:
        reason = self._cancel_reason or "cancelled"
        pending = {
            rid: RouteCancelled(rid, 0, reason)
            for rid, book in self.books.items()
            if not book.ended
        }
        meta = self.durable.meta if self.durable is not None else None
        return merged_report(self.books.values(), wall_s, pending, meta)

    def cancel(self, reason: str) -> None:
        """Cancel every shard; each route ends ``RouteCancelled`` with ``reason``."""
        if self._cancel_reason is None:
            self._cancel_reason = reason
        for handle in list(self._handles.values()):
            handle.cancel(reason)  # type: ignore[attr-defined]

    async def _watch_sigint(self) -> None:
        await wait_for_signal(RUN_SIGNALS)
        self._interrupted = True
        self.cancel(INTERRUPTED)

    def _launch(self, parts: tuple[RoutePart, ...], attempt: int) -> None:
        self._serial += 1
        durable = self.durable
        contracts = dict(durable.contracts) if durable and durable.ledger else None
        work = ShardWork(f"shard-{self._serial}", attempt, parts, self.options, contracts)
        self._live += 1
        self._nursery.start_soon(self._follow, work)

    async def _follow(self, work: ShardWork) -> None:
        """Start ``work`` on the backend and take in its stream until it ends or dies."""
        token = trio.lowlevel.current_trio_token()
        died: BaseException | None = None
        try:
            handle = await trio.to_thread.run_sync(self.backend.start, work)
            self._handles[work.shard_id] = handle
            if self._cancel_reason is not None:
                handle.cancel(self._cancel_reason)

            def pump() -> None:
                for batch in handle.batches():
                    trio.from_thread.run(self._take, batch, trio_token=token)

            await trio.to_thread.run_sync(pump)
        except (ShardDied, OSError) as exc:
            died = exc
        except Exception as exc:  # a backend failure is a lost shard, not a lost run
            log.warning("shard %s failed: %r", work.shard_id, exc)
            died = exc
        finally:
            self._handles.pop(work.shard_id, None)
        self._lost(work, died)  # a no-op when every route of the shard has ended
        self._live -= 1
        if self._live == 0:
            self._all_ended.set()

    async def _take(self, batch: list[Item]) -> None:
        for item in batch:
            if isinstance(item, EpisodeDone):
                book = self.books[item.route_id]
                # Sessions of this ticket: the shards before this one, plus the shard's own.
                attempts = item.result.attempts + book.attempts - 1
                result = attrs.evolve(item.result, attempts=attempts)
                if self._unlike(item) or not book.add(result):
                    continue
                self._record(item.route_id, result, item.env_contract)
                if item.event is not None:
                    await self._hook("episode_completed", item.event)
            elif isinstance(item, HookCall):
                await self._hook(item.name, item.event)
            elif isinstance(item, RouteEnded):
                self._route_ended(item)

    def _unlike(self, item: EpisodeDone) -> bool:
        """Whether ``item`` ran against another env contract than its entry's episodes so far
        (shards check the ledger's; this catches two shards that disagree): its route fails."""
        if self.durable is None or self.durable.ledger is None or item.env_contract is None:
            return False
        mismatch = self.durable.check_contract(item.route_id, item.env_contract)
        if mismatch is None:
            return False
        if not self.books[item.route_id].ended:
            self.books[item.route_id].end("failed", mismatch)
            self._failed(item.route_id, mismatch)
        return True

    def _record(
        self, route_id: str, result: EpisodeResult, contract: Mapping[str, str] | None
    ) -> None:
        """Append a newly delivered episode to the ledger: the coordinator is its one writer."""
        writer = self.durable.writer if self.durable is not None else None
        if writer is None or self.durable is None:
            return
        tickets = self.durable.plan.entry(route_id).tickets or ()
        try:
            writer.write_episode(tickets[result.index], result, contract)
        except OSError as exc:
            error = LedgerError(writer.path, f"cannot write: {exc}")
            self.books[route_id].end("failed", error)
            self._failed(route_id, error)

    async def _hook(self, name: str, event: object) -> None:
        if self.hooks is None:
            return
        try:
            await getattr(self.hooks, name)(event)
        except Exception as exc:  # event hooks are best-effort, as in a local run
            log.warning("hook %s failed: %r", name, exc)

    def _route_ended(self, ended: RouteEnded) -> None:
        book = self.books[ended.route_id]
        book.part_ended(ended)
        if ended.status == "completed":
            # A pool's route ends when the pool has nothing left for it; its siblings may
            # still be running their last tickets (or, under isolate, have failed on some).
            if not book.owed or book.pool is not None:
                book.end("completed")
        elif ended.status == "failed":
            book.end("failed", ended.error)
            self._failed(ended.route_id, ended.error)
        else:
            book.end("cancelled", ended.error)

    def _failed(self, route_id: str, error: BaseException | None) -> None:
        log.warning("route %s failed: %s", route_id, error)
        if self._primary is None and error is not None:
            self._primary = (route_id, error)
            if self.options.on_failure == "cancel_siblings":
                self.cancel(f"cancelled after sibling route {route_id} failed: {error}")

    def _part(self, route: Route, owed: IndexRuns) -> RoutePart:
        base = self.trial_bases[str(route.route_id)]
        if route.ticket_pool is not None:
            return pool_part(route, owed, base)
        return owed_part(route, owed, base)

    def _lost(self, work: ShardWork, cause: BaseException | None) -> None:
        """Deal the owed tickets of ``work``'s unfinished routes to a new shard (or fail them)."""
        if all(self.books[part.route_id].ended for part in work.parts):
            return
        detail = str(cause) if cause is not None else "its stream ended early"
        log.warning("shard %s lost (attempt %d): %s", work.shard_id, work.attempt, detail)
        again: list[RoutePart] = []
        for part in work.parts:
            book = self.books[part.route_id]
            if book.ended:
                continue
            owed = book.owed
            if not owed:
                book.end("completed")
            elif self._cancel_reason is not None:
                book.end("cancelled", RouteCancelled(book.route_id, 0, self._cancel_reason))
            elif work.attempt >= self.max_shard_attempts:
                error = ShardLost(book.route_id, work.shard_id, work.attempt, detail)
                book.end("failed", error)
                self._failed(book.route_id, error)
            else:
                book.attempts = work.attempt + 1
                again.append(self._part(book.route, owed))
        if again:
            self._launch(tuple(again), work.attempt + 1)
