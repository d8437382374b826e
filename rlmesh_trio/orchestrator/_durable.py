"""A run's durable state: its plan, its ledger (checked, read, opened) and its metadata.

Everything that can refuse a run does so in :func:`prepare_durable`, before
any file is written or any endpoint touched: a non-empty ledger without
resume (:class:`LedgerExists`, the file untouched), a ledger of another plan
(:class:`PlanMismatch`, naming what differs: seeds, caps, trial bases, the env
or the model), a ledger written before plans named their env and model
(:class:`LedgerError`: it cannot be checked, so it is not resumed), a ledger
with unbounded routes. A resume logs (and ``RunMeta.resumed`` says) what it
resumed: ``resuming LEDGER: 37 of 120 episodes done, 83 to go``.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import attrs

from .._errors import InvalidSpec
from ..report._outcome import RouteOutcome, RunMeta
from ..report._report import RunReport
from ..runtime._results import EpisodeResult, RouteReport
from ._ledger import (
    LEDGER_SCHEMA,
    LEDGER_VERSION,
    LedgerEntry,
    LedgerError,
    LedgerExists,
    LedgerWriter,
    check_ledger_place,
    ledger_is_empty,
    read_ledger,
    write_failure,
)
from ._options import RunOptions
from ._plan import Plan, PlanMismatch, plan_digest
from ._pool import TicketQueue
from ._retry import RetryPolicy
from ._tickets import IndexRuns

__all__ = ["DurableRun", "load_ledger", "prepare_durable", "run_meta"]

log = logging.getLogger("rlmesh_trio.ledger")

#: Why a ledger written before plans named their env and model cannot be resumed.
PREDATES_IDENTITY = (
    "predates the plan identity check (it does not record which env and model its "
    "episodes ran against), so a resume cannot tell whether they are the same; "
    "start a new ledger (rlmesh-trio report still reads this one)"
)

#: What a run's results stand on: the event loop, the HTTP/2 and header-compression
#: libraries the wire core drives (h2, hpack), the protobuf codec, the env and array
#: libraries, and rlmesh when its servers are driven. Test-only peers (grpclib) are not
#: recorded: they never run in a run.
_PACKAGES = ("rlmesh-trio", "trio", "h2", "hpack", "betterproto2", "gymnasium", "numpy", "rlmesh")


def package_versions() -> dict[str, str]:
    """Versions of the packages that shape a run's results (those installed)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # Read once per process: the metadata scan costs ~1.5 ms, and the modules this
    # process already imported do not change when a package is reinstalled under it.
    found = [("python", sys.version.split()[0])]
    for name in _PACKAGES:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(found)


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def run_meta(plan: Plan, argv: Sequence[str] | None, ledger: str | None) -> RunMeta:
    """The metadata of a run starting now (``argv`` defaults to ``sys.argv``)."""
    bounded = plan.bounded
    return RunMeta(
        versions=package_versions(),
        argv=tuple(sys.argv if argv is None else argv),
        started_at=_now_iso(),
        plan_digest=plan.digest if bounded else None,
        plan=plan.identity() if bounded else None,
        ledger=ledger,
    )


@attrs.define
class DurableRun:
    """A run's plan, the episodes its ledger already holds, and (while running) the writer."""

    plan: Plan
    policy: RetryPolicy
    meta: RunMeta
    ledger: str | None = None
    done: dict[str, LedgerEntry] = attrs.field(factory=dict)
    #: The same entries by plan entry (the ticket's route part): each route's share is read
    #: once per route, so a resume over many routes must not scan the whole ledger each time.
    done_by_entry: dict[str, list[LedgerEntry]] = attrs.field(factory=dict)
    fresh: bool = True
    truncate_to: int | None = None
    writer: LedgerWriter | None = None

    queues: dict[str, TicketQueue] = attrs.field(factory=dict)
    #: Plan entry -> the env contract identity its episodes ran against (ledger or this run).
    contracts: dict[str, Mapping[str, str]] = attrs.field(factory=dict)
    #: Plan entry -> the only tickets this run owes it (a shard's share; default: the plan's).
    owed: dict[str, IndexRuns] = attrs.field(factory=dict)
    #: Check env contracts without a ledger here (a shard of a run whose coordinator keeps one).
    shard_checks: bool = False

    @property
    def checks_contracts(self) -> bool:
        return self.ledger is not None or self.shard_checks

    def as_shard(
        self, owed: Mapping[str, IndexRuns], contracts: dict[str, Mapping[str, str]] | None
    ) -> None:
        """Run as a distributed shard: only ``owed[entry]`` of these entries; with
        ``contracts`` (the coordinator's, from its ledger) check every entry's env
        contract against it. The dict is kept, not copied: the contracts this run
        meets are added to it, for the shard to send back with its episodes."""
        self.owed.update(owed)
        if contracts is not None:
            self.contracts, self.shard_checks = contracts, True

    def check_contract(self, route_id: str, contract: Mapping[str, str]) -> PlanMismatch | None:
        """Whether route ``route_id`` may record episodes against ``contract``.

        The first contract an entry (route or pool) meets is kept; a later one
        that differs (a resume against another env, a pool of unlike envs) is
        a :class:`PlanMismatch` naming both.
        """
        owner = self.plan.entry(route_id).route_id
        known = self.contracts.setdefault(owner, dict(contract))
        if known == dict(contract):
            return None
        return PlanMismatch(
            [
                f"route {route_id}: env contract differs (ledger: {_contract_text(known)}; "
                f"this run: {_contract_text(contract)})"
            ]
        )

    def known_contract(self, route_id: str) -> Mapping[str, str] | None:
        """The env contract route ``route_id``'s entry met (in the ledger or this run), if any."""
        try:
            owner = self.plan.entry(route_id).route_id
        except KeyError:
            return None
        return self.contracts.get(owner)

    def queue(self, route_id: str) -> TicketQueue | None:
        """The tickets route ``route_id`` draws from (shared by a pool); ``None``: unplanned."""
        entry = self.plan.entry(route_id)
        queue = self.queues.get(entry.route_id)
        if queue is None:
            if entry.episodes is None:
                return None
            workers = len(self.plan.workers(entry.route_id))
            dynamic = entry.dealing == "dynamic"
            done = (_ticket_number(e) for e in self.done_by_entry.get(entry.route_id, ()))
            left = self.owed.get(entry.route_id)
            if left is not None:
                queue = TicketQueue.of_runs(entry.ticket, left, routes=workers, dynamic=dynamic)
            else:
                queue = TicketQueue.lazy(
                    entry.ticket, entry.episodes, done, routes=workers, dynamic=dynamic
                )
            self.queues[entry.route_id] = queue
        return queue

    def finished(self, route_id: str) -> dict[int, EpisodeResult]:
        """Episodes the ledger holds for ``route_id``, by episode index.

        A pool's episodes go to the route that ran them, or to the pool's first
        route when that route is not in this run.
        """
        owner = self.plan.owners.get(route_id, route_id)
        workers = self.plan.workers(owner) or [route_id]
        found: dict[int, EpisodeResult] = {}
        for entry in self.done_by_entry.get(owner, ()):
            runner = entry.route_id if entry.route_id in workers else workers[0]
            if runner == route_id:
                found[entry.result.index] = entry.result
        return found

    def open(self) -> LedgerWriter | None:
        """Open the ledger for appending: a header for a new one, a ``resume`` line otherwise.

        Raises:
            LedgerError: the file cannot be opened, another run holds it, or the
                header cannot be written (a full disk is named as such).
        """
        if self.ledger is None:
            return None
        try:
            writer = LedgerWriter(self.ledger, truncate_to=self.truncate_to)
        except OSError as exc:
            raise LedgerError(self.ledger, f"cannot open: {exc.strerror or exc}") from None
        meta = self.meta.to_dict()
        try:
            if self.fresh:
                writer.write({"schema": LEDGER_SCHEMA, "version": LEDGER_VERSION, **meta})
            else:
                writer.write({"type": "resume", **{k: meta[k] for k in ("argv", "started_at")}})
        except OSError as exc:
            with contextlib.suppress(OSError):
                writer.close()
            raise write_failure(self.ledger, exc) from None
        self.writer = writer
        return writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def prepare_durable(
    plan: Plan, options: RunOptions, argv: Sequence[str] | None = None
) -> DurableRun:
    """Check ``options.ledger`` against ``plan`` and read what it holds (the file is not
    written); ``options`` already refused ``resume`` without a ledger.

    Raises:
        InvalidSpec: a ledger with an unbounded route.
        LedgerExists: a non-empty ledger without ``resume``.
        LedgerError: the ledger is unreadable or corrupt before its last line.
        PlanMismatch: the ledger was written for another plan.
    """
    ledger, resume = options.ledger, options.resume
    path = os.fspath(ledger) if ledger is not None else None
    meta = run_meta(plan, argv, path)
    run = DurableRun(plan=plan, policy=options.retry_policy, meta=meta, ledger=path)
    if path is None:
        return run
    unbounded = [r.route_id for r in plan.routes if r.episodes is None]
    if unbounded:
        raise InvalidSpec(
            f"route {unbounded[0]}: a ledger needs seeds or an episode count on every route"
        )
    check_ledger_place(path)
    folder = os.path.dirname(os.path.abspath(path))
    writable = os.access(path, os.W_OK) if os.path.exists(path) else os.access(folder, os.W_OK)
    if not writable:
        raise LedgerError(path, "is not writable")
    if ledger_is_empty(path):
        return run
    if not resume:
        raise LedgerExists(
            path, "already holds a run; resume it (resume=True, --resume) or choose a new file"
        )
    _load_into(run, path)
    return run


def _load_into(run: DurableRun, path: str) -> None:
    contents = read_ledger(path)
    run.meta = attrs.evolve(run.meta, ledger_torn_bytes=contents.torn)
    if not contents.header:
        run.truncate_to = 0  # only a torn header: start afresh on the same file
        return
    header_plan = contents.header.get("plan")
    if not isinstance(header_plan, Mapping):
        raise LedgerError(path, "the header has no plan")
    if run.plan.predates_identity(header_plan):
        raise LedgerError(path, PREDATES_IDENTITY)
    differences = run.plan.differences(header_plan)
    if not differences and not _same_digest(run.plan, header_plan):
        differences = ["the plan identity differs"]
    if differences:
        raise PlanMismatch(differences)
    for entry in contents.entries:
        if not run.plan.has_ticket(entry.ticket):
            raise LedgerError(path, f"episode for ticket {entry.ticket} is not in the plan")
        if entry.ticket in run.done:
            raise LedgerError(path, f"ticket {entry.ticket} is in the ledger twice")
        run.done[entry.ticket] = entry
    run.done_by_entry = _by_owner(contents.entries)
    for entry in contents.entries:
        if entry.env_contract is not None:
            run.contracts.setdefault(entry.ticket.rsplit("/", 1)[0], entry.env_contract)
    run.fresh = False
    run.truncate_to = contents.good_bytes if contents.torn else None
    total = sum(entry.episodes or 0 for entry in run.plan.routes)
    note = resume_note(path, len(run.done), total)
    log.info("%s", note)
    run.meta = attrs.evolve(run.meta, resumed_episodes=len(run.done), resumed=note)


def _contract_text(contract: Mapping[str, str]) -> str:
    return f"{contract.get('env_id') or '?'} with spaces {contract.get('spaces', '?')}"


def _same_digest(plan: Plan, theirs: Mapping[str, Any]) -> bool:
    """The digests agree once endpoint names that :meth:`Plan.differences` let pass are
    taken from the ledger (an address on one side matches a name on the other)."""
    ours = plan.identity()
    by_id = {r.get("route_id"): r for r in theirs.get("routes", ()) if isinstance(r, dict)}
    for route in ours["routes"]:
        other = by_id.get(route["route_id"], {})
        for name in ("env", "model"):
            route[name] = other.get(name, route[name])
    return plan_digest(ours) == plan_digest(theirs)


def resume_note(path: str, done: int, planned: int) -> str:
    """``resuming LEDGER: 37 of 120 episodes done, 83 to go``."""
    return f"resuming {path}: {done} of {planned} episodes done, {planned - done} to go"


def load_ledger(path: str | os.PathLike[str]) -> RunReport:
    """Rebuild a :class:`RunReport` from a ledger alone (no endpoint is contacted).

    A route whose planned tickets are all in the ledger is ``completed``;
    otherwise ``cancelled`` (the run stopped before it finished). Episodes are
    in episode-index order; ``wall_s`` spans the first start to the last finish.

    Raises:
        LedgerError: the file is unreadable, not a ledger, or corrupt before its last line.
    """
    contents = read_ledger(path)
    header = contents.header
    if not header:
        raise LedgerError(os.fspath(path), "has no header line (only a torn one)")
    routes = header.get("plan", {}).get("routes", [])
    argv_labels = _labels_from_argv(header.get("argv") or (), len(routes))
    outcomes = []
    by_owner = _by_owner(contents.entries)
    for number, route in enumerate(routes):
        rid = str(route.get("route_id"))
        env, model = _route_labels(route, argv_labels, number)
        mine = sorted(by_owner.get(rid, ()), key=_index)
        episodes = tuple(e.result for e in mine)
        contract = next((e.env_contract for e in mine if e.env_contract), None)
        done = len(episodes) >= int(route.get("episodes") or 0)
        report = RouteReport(
            route_id=rid,
            session_id=rid,
            env_id="",
            total_steps=sum(ep.steps for ep in episodes),
            total_episodes=len(episodes),
            episodes=episodes,
        )
        outcomes.append(
            RouteOutcome(
                route_id=rid,
                env=env,
                model=model,
                status="completed" if done else "cancelled",
                error=None,
                report=report,
                retries=sum(ep.attempts - 1 for ep in episodes),
                env_contract=contract,
            )
        )
    meta = _meta_from_header(header, str(os.fspath(path)), len(contents.entries))
    return RunReport(routes=tuple(outcomes), wall_s=_span(header, contents.entries), meta=meta)


def _route_labels(
    route: Mapping[str, Any], argv_labels: list[tuple[str, str]] | None, number: int
) -> tuple[str, str]:
    """A ledger route's env and model labels: from its plan entry when the plan names them,
    else from the ``--env``/``--model`` options of the CLI run that wrote it, else ``?``."""
    env, model = route.get("env"), route.get("model")
    fallback = argv_labels[number] if argv_labels else ("?", "?")
    return (
        env if isinstance(env, str) and env else fallback[0],
        model if isinstance(model, str) and model else fallback[1],
    )


def _labels_from_argv(argv: Sequence[Any], routes: int) -> list[tuple[str, str]] | None:
    """``(env, model)`` per route from a ``rlmesh-trio run`` command line (one route per
    ``--env``, in order), or ``None`` when the command line is not one with ``routes`` envs."""
    args = [str(a) for a in argv]
    if "run" not in args:
        return None
    envs: list[str] = []
    model = "?"
    for i, arg in enumerate(args):
        for option in ("--env", "--model"):
            value = None
            if arg == option and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(option + "="):
                value = arg[len(option) + 1 :]
            if value is not None and option == "--env":
                envs.append(value)
            elif value is not None:
                model = value
    if len(envs) != routes:
        return None
    return [(env, model) for env in envs]


def _by_owner(entries: Sequence[LedgerEntry]) -> dict[str, list[LedgerEntry]]:
    """Ledger entries grouped by the plan entry their ticket belongs to, in file order."""
    grouped: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        grouped.setdefault(_owner(entry), []).append(entry)
    return grouped


def _owner(entry: LedgerEntry) -> str:
    """The plan entry (route or ticket pool) of a ledger entry's ticket."""
    return entry.ticket.rsplit("/", 1)[0]


def _ticket_number(entry: LedgerEntry) -> int:
    """The episode index a ledger entry's ticket names (``route/7`` -> 7)."""
    return int(entry.ticket.rsplit("/", 1)[1])


def _index(entry: LedgerEntry) -> int:
    return entry.result.index


def _meta_from_header(header: Mapping[str, Any], path: str, episodes: int) -> RunMeta:
    return RunMeta(
        versions=dict(header.get("versions", {})),
        argv=tuple(header.get("argv", ())),
        started_at=str(header.get("started_at", "")),
        plan_digest=header.get("plan_digest"),
        plan=header.get("plan"),
        ledger=path,
        resumed_episodes=episodes,
    )


def _span(header: Mapping[str, Any], entries: Sequence[LedgerEntry]) -> float:
    if not entries:
        return 0.0
    try:
        start = datetime.datetime.fromisoformat(str(header.get("started_at"))).timestamp()
    except ValueError:
        start = min(e.started_at for e in entries)
    return max(0.0, max(e.finished_at for e in entries) - start)
