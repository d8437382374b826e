"""``run_distributed``: the routes of :func:`~rlmesh_trio.run`, sharded over processes or Ray."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Literal

import attrs
import trio

from .._errors import InvalidSpec
from ..orchestrator._durable import prepare_durable
from ..orchestrator._options import RunOptions
from ..orchestrator._plan import make_plan
from ..orchestrator._retry import DEFAULT_BACKOFF
from ..orchestrator._route import Route
from ..report._report import RunReport
from ..runtime._hooks import RuntimeHooks
from ._backends import Backend, ProcessBackend, ThreadBackend
from ._coordinator import Coordinator
from ._planner import budget, check_picklable, route_ids

__all__ = ["run_distributed"]

BackendName = Literal["ray", "processes", "threads"]
RAY_EXTRA_HINT = 'backend="ray" needs the ray extra: pip install "rlmesh-trio[ray]"'


def _named(routes: Sequence[Route]) -> list[Route]:
    for i, route in enumerate(routes):
        if not isinstance(route, Route):
            raise InvalidSpec(f"routes[{i}] is a {type(route).__name__}, not a Route")
    ids = route_ids(routes)
    duplicates = sorted({rid for rid in ids if ids.count(rid) > 1})
    if duplicates:
        raise InvalidSpec(f"duplicate route ids: {', '.join(duplicates)}")
    named = [attrs.evolve(r, route_id=rid) for r, rid in zip(routes, ids, strict=True)]
    for route in named:
        budget(route)
    return named


def make_backend(backend: BackendName | Backend, address: str | None) -> Backend:
    """The backend named ``backend`` (``ray`` is imported only here, and only then).

    Raises:
        InvalidSpec: an unknown name, or ``ray`` without the extra installed.
    """
    if not isinstance(backend, str):
        return backend
    if backend == "ray":
        try:
            from ._ray import RayBackend
        except ImportError as exc:
            raise InvalidSpec(f"{RAY_EXTRA_HINT} ({exc})") from exc
        return RayBackend(address)
    if address is not None:
        raise InvalidSpec(f"address= is for backend='ray', not {backend!r}")
    if backend == "processes":
        return ProcessBackend()
    if backend == "threads":
        return ThreadBackend()
    raise InvalidSpec(f"backend must be 'ray', 'processes' or 'threads', got {backend!r}")


def _default_shards(backend: Backend, routes: int) -> int:
    capacity = getattr(backend, "capacity", None)
    count = capacity() if callable(capacity) else (os.cpu_count() or 1)
    return max(1, min(routes, int(count)))


def run_distributed(
    routes: Sequence[Route],
    backend: BackendName | Backend = "ray",
    *,
    address: str | None = None,
    shards: int | None = None,
    on_failure: Literal["cancel_siblings", "isolate"] = "cancel_siblings",
    max_shard_attempts: int = 3,
    max_concurrency: int | None = None,
    batch_predicts: bool | None = None,
    client_options: Mapping[str, Any] | None = None,
    hooks: RuntimeHooks | None = None,
    handle_sigint: bool = True,
    ledger: str | os.PathLike[str] | None = None,
    resume: bool = False,
    argv: Sequence[str] | None = None,
    retries: int = 0,
    retry_backoff: float = DEFAULT_BACKOFF,
) -> RunReport:
    """Run ``routes`` over shards and return one merged :class:`RunReport`, in route order.

    Each shard runs our orchestrator over its share of the routes and streams
    finished episodes back. A shard that dies has only its owed episodes dealt to
    a new shard (same seeds and trials), up to ``max_shard_attempts`` in all; then
    the route fails with :class:`~rlmesh_trio.ShardLost`. No episode appears twice.

    ``backend``: ``"ray"`` (``address`` as for ``ray.init``; else a local cluster,
    shut down afterwards), ``"processes"`` (this machine) or ``"threads"``. ``shards``
    defaults to the backend's CPU count, at most one per route. ``batch_predicts`` as
    for ``rt.run``, per shard; ``True`` keeps routes of one model endpoint in one shard;
    the routes of a ticket pool (``shard(..., dealing="dynamic")``) always do, and
    share the pool there as in a local run (a pool is never split). ``ledger``/
    ``resume`` as for :func:`~rlmesh_trio.run` (the coordinator is the ledger's one
    writer; a ledger resumes across backends, local included); ``retries``/``retry_backoff``
    as there too, applied by each shard to its routes.

    Raises:
        InvalidSpec: a bad option (as for :class:`~rlmesh_trio.RunOptions`), a route
            that cannot be sent to a shard (named), a route with no episode budget, or
            a backend that is not available; a ledger refused (``LedgerExists``,
            ``PlanMismatch``, ``LedgerError``) as for :func:`~rlmesh_trio.run`.
        RunFailed: a route failed under ``cancel_siblings``; every shard was cancelled
            and the merged report is on the error.
        RunInterrupted: Ctrl+C cancelled every shard; the partial report is on it.
    """
    options = RunOptions(
        on_failure=on_failure,
        max_concurrency=max_concurrency,
        handle_sigint=handle_sigint,
        batch_predicts=batch_predicts,
        client_options=client_options,
        ledger=ledger,
        resume=resume,
        retries=retries,
        retry_backoff=retry_backoff,
    )
    named = _checked_routes(routes, backend, max_shard_attempts)
    durable = prepare_durable(make_plan(named, route_ids(named)), options, argv)
    return _coordinate(
        named,
        make_backend(backend, address),
        shards,
        # The coordinator is the ledger's one writer: shards run without it.
        attrs.evolve(options, ledger=None, resume=False),
        max_shard_attempts=max_shard_attempts,
        handle_sigint=handle_sigint,
        hooks=hooks,
        durable=durable,
    )


def _checked_routes(
    routes: Sequence[Route], backend: BackendName | Backend, max_shard_attempts: int
) -> list[Route]:
    """``routes`` named and checked before anything starts (see ``_check_travel``)."""
    named = _named(routes)
    _check_travel(named, backend)
    if max_shard_attempts < 1:
        raise InvalidSpec(f"max_shard_attempts must be >= 1, got {max_shard_attempts}")
    return named


def _check_travel(routes: list[Route], backend: BackendName | Backend) -> None:
    """Routes that go to other processes must pickle: checked before any backend starts
    (``ray.init`` alone takes seconds).

    Raises:
        InvalidSpec: naming the route and its part (env, model, hooks) that does not pickle.
    """
    if backend != "threads" and not isinstance(backend, ThreadBackend):
        check_picklable(routes)


def _coordinate(
    routes: list[Route], backend: Backend, shards: int | None, options: RunOptions, **kw: Any
) -> RunReport:
    """Run the coordinator over ``backend`` in a fresh Trio run, closing the backend after."""
    try:
        coordinator = Coordinator(
            routes,
            backend,
            shards=shards or _default_shards(backend, len(routes)),
            options=options,
            **kw,
        )
        return trio.run(partial(coordinator.run))
    finally:
        backend.close()
