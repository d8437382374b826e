"""The plan of a run: its routes expanded into a fixed tuple of tickets.

A ticket is one planned episode: (route id, episode index, seed, trial). The
plan's identity is the *work* (route ids, seeds, episode counts, caps, trial
bases) and what it runs against (the env and model of each route, named by
``_identity``), never the addresses, so a resumed run may find its servers on
new ports and still be the same plan. Tickets are made lazily: a plan of
millions of episodes costs no memory until they run.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._errors import InvalidSpec
from ._identity import ADDRESS, env_identity, model_identity
from ._route import Route
from ._tickets import IndexRuns, Ticket, TicketSeq

__all__ = ["Plan", "PlanMismatch", "RoutePlan", "Ticket", "deal_trial_bases", "make_plan"]

#: The fields of a route that make up the plan's identity, in the order differences are named.
IDENTITY_FIELDS = (
    "dealing",
    "episodes",
    "seeds",
    "trial_index_base",
    "max_episode_steps",
    "max_episode_seconds",
    "execution_horizon",
    "env",
    "model",
)
#: Fields whose values a difference names ("env differs (ledger: X; this run: Y)").
_NAMED_FIELDS = ("env", "model")


class PlanMismatch(InvalidSpec):
    """A ledger was written for another plan; ``differences`` names each thing that differs."""

    def __init__(self, differences: Sequence[str]) -> None:
        self.differences = tuple(differences)
        super().__init__("the ledger belongs to another plan: " + "; ".join(self.differences))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.differences,))


@attrs.frozen
class RoutePlan:
    """What one route (or one ticket pool) was asked to do.

    ``tickets`` is ``None`` for a route without a budget. For a pool
    (``dealing == "dynamic"``) ``route_id`` is the pool's name and the routes
    drawing from it are not part of the identity: a resumed run may bring
    more or fewer endpoints.
    """

    route_id: str
    episodes: int | None
    seeds: tuple[int, ...] | None
    trial_index_base: int
    max_episode_steps: int | None
    max_episode_seconds: float | None
    execution_horizon: int
    dealing: str = "static"
    #: What the entry's routes run against (sorted, distinct: a pool may have many routes).
    env: tuple[str, ...] = ()
    model: tuple[str, ...] = ()

    def ticket(self, index: int) -> Ticket:
        """Planned episode ``index`` (made now: tickets are never stored)."""
        seeds = self.seeds
        return Ticket(
            self.route_id,
            index,
            seeds[index] if seeds is not None else None,
            self.trial_index_base + index,
        )

    @property
    def tickets(self) -> Sequence[Ticket] | None:
        """Every planned ticket, made as it is read (``None`` without a budget)."""
        if self.episodes is None:
            return None
        return TicketSeq(self.ticket, IndexRuns([range(self.episodes)]))

    def identity(self) -> dict[str, Any]:
        data: dict[str, Any] = {"route_id": self.route_id}
        for name in IDENTITY_FIELDS:
            value = getattr(self, name)
            data[name] = list(value) if isinstance(value, tuple) else value
        return data


@attrs.frozen
class Plan:
    """Every route's plan, in route order; ``digest`` is a stable hash of :meth:`identity`."""

    routes: tuple[RoutePlan, ...]
    #: route id -> the plan entry it draws tickets from (its own id, or its pool's name).
    owners: Mapping[str, str] = attrs.field(factory=dict, eq=False)

    def entry(self, route_id: str) -> RoutePlan:
        """The plan entry (route or pool) route ``route_id`` draws its tickets from."""
        owner = self.owners.get(route_id, route_id)
        try:
            return self._by_id[owner]
        except KeyError:
            raise KeyError(route_id) from None

    @functools.cached_property
    def _by_id(self) -> dict[str, RoutePlan]:
        # Every route looks its entry up once: a scan each would be quadratic in routes.
        by_id: dict[str, RoutePlan] = {}
        for route in self.routes:
            by_id.setdefault(route.route_id, route)
        return by_id

    def workers(self, owner: str) -> Sequence[str]:
        """The route ids drawing tickets from plan entry ``owner``, in plan order."""
        return self._workers.get(owner, ())

    @functools.cached_property
    def _workers(self) -> dict[str, list[str]]:
        # Every route asks once: a scan of all owners each would be quadratic in routes.
        workers: dict[str, list[str]] = {}
        for rid, owner in self.owners.items():
            workers.setdefault(owner, []).append(rid)
        return workers

    @property
    def bounded(self) -> bool:
        """Whether every route has a finite episode count (a ledger needs one)."""
        return all(route.episodes is not None for route in self.routes)

    def identity(self) -> dict[str, Any]:
        return {"routes": [route.identity() for route in self.routes]}

    @functools.cached_property
    def digest(self) -> str:
        # Computed once: every route seeds its retry jitter with it (once per route, so a
        # fresh hash of the whole plan each time was quadratic in routes).
        return plan_digest(self.identity())

    def tickets(self) -> tuple[Ticket, ...]:
        """Every ticket of the plan at once (for small plans and tests; runs never need it)."""
        return tuple(t for route in self.routes for t in (route.tickets or ()))

    def has_ticket(self, key: str) -> bool:
        """Whether ``route/index`` names a planned ticket (without making any)."""
        owner, _, index = key.rpartition("/")
        entry = next((r for r in self.routes if r.route_id == owner), None)
        if entry is None or entry.episodes is None or not index.isdigit():
            return False
        return int(index) < entry.episodes and key == f"{owner}/{int(index)}"

    def differences(self, identity: Mapping[str, Any]) -> list[str]:
        """What differs between this plan and another plan's identity (empty: same plan)."""
        theirs = {r.get("route_id"): r for r in identity.get("routes", ()) if isinstance(r, dict)}
        ours = {route.route_id: route.identity() for route in self.routes}
        found: list[str] = []
        missing = [rid for rid in theirs if rid not in ours]
        extra = [rid for rid in ours if rid not in theirs]
        if missing:
            listed = ", ".join(map(str, missing))
            found.append(f"routes in the ledger but not in this run: {listed}")
        if extra:
            found.append("routes in this run but not in the ledger: " + ", ".join(extra))
        for rid, mine in ours.items():
            other = theirs.get(rid)
            if other is None:
                continue
            for name in IDENTITY_FIELDS:
                if mine.get(name) == other.get(name):
                    continue
                if name in _NAMED_FIELDS:
                    if _compatible(mine.get(name), other.get(name)):
                        continue
                    found.append(
                        f"route {rid}: {name} differs (ledger: {_names(other.get(name))}; "
                        f"this run: {_names(mine.get(name))})"
                    )
                else:
                    found.append(f"route {rid}: {name.replace('_', ' ')} differ")
        return found

    def predates_identity(self, identity: Mapping[str, Any]) -> bool:
        """Whether ``identity`` (a ledger's) was written before plans named env and model."""
        routes = [r for r in identity.get("routes", ()) if isinstance(r, dict)]
        return bool(routes) and not all("env" in r and "model" in r for r in routes)


def _compatible(mine: Any, theirs: Any) -> bool:
    """Whether two entries' env (or model) names may be the same endpoints.

    An address names nothing before it is reached (its env contract is
    checked on connect), so it matches any name; otherwise the names must agree.
    """
    ours = {str(v) for v in mine or ()} - {ADDRESS}
    other = {str(v) for v in theirs or ()} - {ADDRESS}
    return not ours or not other or ours == other


def _names(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "?"
    return str(value)


def plan_digest(identity: Mapping[str, Any]) -> str:
    """sha256 of the identity's canonical JSON (sorted keys, no spaces), first 16 hex digits."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def deal_trial_bases(
    routes: Sequence[Route], route_ids: Sequence[str], given: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The trial base of every route: its own, ``given[route_id]``, or a dealt block.

    Routes without a base (``trial_index_base=None``) get consecutive blocks
    in route order (a ticket pool one block for all its routes), starting
    after the highest trial an explicit base claims; so no two planned
    episodes of a run share a trial. A route without a budget claims no
    block (it has no tickets; its driver walks trials from 0).
    """
    bases: dict[str, int] = {}
    pools: dict[str, int] = {}
    explicit_end = 0
    for route in routes:
        if route.trial_index_base is not None:
            explicit_end = max(explicit_end, route.trial_index_base + (route.episode_budget or 0))
    next_trial = explicit_end
    for route, rid in zip(routes, route_ids, strict=True):
        if route.trial_index_base is not None:
            bases[rid] = route.trial_index_base
        elif given is not None and rid in given:
            bases[rid] = given[rid]
        elif route.ticket_pool is not None and route.ticket_pool in pools:
            bases[rid] = pools[route.ticket_pool]
        else:
            bases[rid] = next_trial
            if route.ticket_pool is not None:
                pools[route.ticket_pool] = next_trial
            next_trial += route.episode_budget or 0
    return bases


def _route_plan(route: Route, plan_id: str, dealing: str, trial_base: int) -> RoutePlan:
    return RoutePlan(
        route_id=plan_id,
        episodes=route.episode_budget,
        seeds=route.seeds,
        trial_index_base=trial_base,
        max_episode_steps=route.max_episode_steps,
        max_episode_seconds=route.max_episode_seconds,
        execution_horizon=route.execution_horizon,
        dealing=dealing,
        env=(env_identity(route.env),),
        model=(model_identity(route.model),),
    )


def _merged(known: RoutePlan, entry: RoutePlan) -> RoutePlan:
    """A pool's entry with the env and model names of one more of its routes."""
    return attrs.evolve(
        known,
        env=tuple(sorted({*known.env, *entry.env})),
        model=tuple(sorted({*known.model, *entry.model})),
    )


def make_plan(
    routes: Sequence[Route],
    route_ids: Sequence[str],
    trial_bases: Mapping[str, int] | None = None,
) -> Plan:
    """Expand ``routes`` (with their resolved ids) into a :class:`Plan`.

    Routes sharing a ``ticket_pool`` become one entry named after the pool.
    Trial bases are dealt by :func:`deal_trial_bases` (``trial_bases``: the
    bases a coordinator already dealt, for routes without their own).

    Raises:
        InvalidSpec: routes of one pool disagree on their work, a pool has no
            episode budget, or a pool's name is also a route id.
    """
    entries: dict[str, RoutePlan] = {}
    owners: dict[str, str] = {}
    bases = deal_trial_bases(routes, route_ids, trial_bases)
    for route, rid in zip(routes, route_ids, strict=True):
        pool = route.ticket_pool
        if pool is None:
            if rid in entries:
                raise InvalidSpec(f"route id {rid} is also the name of a ticket pool")
            entries[rid] = _route_plan(route, rid, "static", bases[rid])
            owners[rid] = rid
            continue
        entry = _route_plan(route, pool, "dynamic", bases[rid])
        if entry.episodes is None:
            raise InvalidSpec(f"ticket pool {pool}: needs seeds or an episode count")
        known = entries.get(pool)
        same_work = known is not None and attrs.evolve(known, env=(), model=()) == attrs.evolve(
            entry, env=(), model=()
        )
        if known is not None and (known.dealing != "dynamic" or not same_work):
            raise InvalidSpec(
                f"ticket pool {pool}: route {rid} asks for different work than the pool's "
                "first route (seeds, episodes, caps and trial base must agree), "
                "or the pool's name is also a route id"
            )
        entries[pool] = entry if known is None else _merged(known, entry)
        owners[rid] = pool
    clash = [rid for rid, owner in owners.items() if owner != rid and rid in entries]
    if clash:
        raise InvalidSpec(f"route id {clash[0]} is also the name of a ticket pool")
    return Plan(tuple(entries.values()), owners)
