"""Splitting a run's routes into shards, and cutting a route down to what is still owed."""

from __future__ import annotations

import ipaddress
import pickle
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from .._errors import InvalidSpec
from ..orchestrator._route import Route
from ..orchestrator._tickets import IndexRuns
from ._work import RoutePart

__all__ = [
    "budget",
    "check_picklable",
    "is_loopback",
    "owed_part",
    "plan_shards",
    "pool_part",
    "route_ids",
]


def route_ids(routes: Sequence[Route]) -> list[str]:
    """The ids the orchestrator would give ``routes`` (``route-i`` where none is set)."""
    return [route.route_id or f"route-{i}" for i, route in enumerate(routes)]


def check_picklable(routes: Sequence[Route]) -> None:
    """Refuse, before anything starts, a route that cannot travel to a shard.

    The message says which part failed to pickle: the env, the model, the hooks
    (each tried alone), or else the route's other fields.

    Raises:
        InvalidSpec: naming the route, the part and the pickling error.
    """
    for route in routes:
        try:
            pickle.dumps(route)
        except Exception as exc:
            failed = _unpicklable_parts(route) or [("route", exc)]
            parts = " and ".join(f"its {name}" for name, _ in failed)
            verb = "do" if len(failed) > 1 else "does"
            name, first = failed[0]
            raise InvalidSpec(
                f"route {route.route_id}: cannot be sent to a shard: {parts} {verb} not pickle "
                f"({name}: {type(first).__name__}: {first}); give addresses, env ids or "
                f"module-level callables and classes instead of local objects"
            ) from exc


def _unpicklable_parts(route: Route) -> list[tuple[str, Exception]]:
    """Which of the route's env, model and hooks fail to pickle, each with its error."""
    failed = []
    for name in ("env", "model", "hooks"):
        try:
            pickle.dumps(getattr(route, name))
        except Exception as exc:
            failed.append((name, exc))
    return failed


def budget(route: Route) -> int:
    """The route's episode count.

    Raises:
        InvalidSpec: for a route that runs until cancelled.
    """
    budget = route.episode_budget
    if budget is None:
        raise InvalidSpec(
            f"route {route.route_id}: a distributed run needs seeds or an episode count "
            f"(a route that runs until cancelled has no tickets to deal)"
        )
    return budget


def _model_key(route: Route) -> Any:
    return route.model if isinstance(route.model, str) else id(route.model)


def _load(group: Sequence[Route]) -> int:
    """A group's episodes: a ticket pool's budget counts once, however many routes draw on it."""
    pools = {r.ticket_pool: budget(r) for r in group if r.ticket_pool is not None}
    return sum(pools.values()) + sum(budget(r) for r in group if r.ticket_pool is None)


def _groups(routes: Sequence[Route], batch_predicts: bool) -> list[list[Route]]:
    """Routes that must share a shard: one ticket pool's routes (its queue lives in one
    process), and with ``batch_predicts`` the routes of one model endpoint; joined
    transitively (a pool and a model that overlap make one group), in route order."""
    parent = list(range(len(routes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[Any, int] = {}
    for i, route in enumerate(routes):
        keys = [("pool", route.ticket_pool)] if route.ticket_pool is not None else []
        if batch_predicts:
            keys.append(("model", _model_key(route)))
        for key in keys:
            parent[root(i)] = root(first.setdefault(key, i))
    groups: dict[int, list[Route]] = {}
    for i, route in enumerate(routes):
        groups.setdefault(root(i), []).append(route)
    return list(groups.values())


def plan_shards(routes: Sequence[Route], shards: int, *, batch_predicts: bool) -> list[list[Route]]:
    """Deal ``routes`` (ids already set) into at most ``shards`` groups, balancing episodes.

    The routes of one ticket pool stay in one shard (the pool is one queue, in
    one process; a pool is never split). With ``batch_predicts`` the routes
    that share a model endpoint stay in one shard too, so their predicts still
    group into batched round trips. Groups are placed largest first onto the
    lightest shard; route order is kept inside each shard. Empty shards are dropped.
    """
    if shards < 1:
        raise InvalidSpec(f"shards must be >= 1, got {shards}")
    bins: list[list[Route]] = [[] for _ in range(shards)]
    loads = [0] * shards
    for group in sorted(_groups(routes, batch_predicts), key=lambda g: -_load(g)):
        lightest = loads.index(min(loads))
        bins[lightest].extend(group)
        loads[lightest] += _load(group)
    position = {route.route_id: i for i, route in enumerate(routes)}
    return [sorted(b, key=lambda r: position[r.route_id]) for b in bins if b]


def owed_part(route: Route, owed: Iterable[int], trial_base: int | None = None) -> RoutePart:
    """The route cut down to the planned episodes ``owed`` (ascending indices).

    Seeds follow their tickets; the trial base moves to the first owed
    episode (exact when the owed episodes are one contiguous tail, which is
    what a shard loses on a single env; a gap in lanes is noted in the docs).
    ``trial_base`` is the base the run dealt a route without its own; the
    part keeps ``trial_index_base=None`` and carries it in ``trial_base``.
    """
    indices = owed if isinstance(owed, IndexRuns) else IndexRuns.of(owed)
    if not indices:
        raise ValueError("owed_part needs at least one owed episode")
    seeds = None if route.seeds is None else tuple(route.seeds[i] for i in indices)
    own = route.trial_index_base
    cut = attrs.evolve(
        route,
        seeds=seeds,
        episodes=len(indices),
        trial_index_base=None if own is None else own + indices[0],
    )
    dealt = None if own is not None else (trial_base or 0) + indices[0]
    return RoutePart(route=cut, indices=indices, trial_base=dealt)


def pool_part(route: Route, owed: IndexRuns, trial_base: int | None = None) -> RoutePart:
    """A ticket pool's route as a shard runs it: whole, drawing only on the pool's ``owed``
    tickets (so its seeds and trials are the pool's own, gaps or not).

    Raises:
        ValueError: nothing is owed.
    """
    if not owed:
        raise ValueError("pool_part needs at least one owed episode")
    dealt = trial_base if route.trial_index_base is None else None
    return RoutePart(route=route, indices=IndexRuns(), trial_base=dealt, owed=owed)


def is_loopback(address: Any) -> bool:
    """True for an address only this machine can reach (127/8, ::1, localhost, unix)."""
    if not isinstance(address, str):
        return False  # an in-process env or policy travels with the route
    text = address.removeprefix("tcp://")
    if text.startswith("unix:"):
        return True
    host = text.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
