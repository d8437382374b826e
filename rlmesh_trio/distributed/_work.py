"""What travels between the coordinator and its shards: work going out, items coming back.

Everything here pickles (attrs value objects holding routes, episode results
and our exceptions), because a shard may live in another process or on
another machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ..orchestrator import Route
from ..orchestrator._tickets import IndexRuns
from ..runtime import EpisodeResult, RouteReport

__all__ = [
    "EpisodeDone",
    "HookCall",
    "Item",
    "RouteEnded",
    "RoutePart",
    "RunOptions",
    "ShardEnded",
    "ShardWork",
    "TicketKey",
]

#: A planned episode: (route id, the episode's index among the route's planned episodes).
TicketKey = tuple[str, int]


@attrs.frozen
class RunOptions:
    """The run-wide settings every shard's orchestrator gets."""

    on_failure: Literal["cancel_siblings", "isolate"] = "cancel_siblings"
    max_concurrency: int | None = None
    #: As ``rt.run``'s: None fuses the routes of a shard that share one in-process policy.
    batch_predicts: bool | None = None
    client_options: Mapping[str, Any] = attrs.field(factory=dict)
    #: Reruns per route after a broken connection, inside its shard (as ``retries=`` locally).
    retries: int = 0
    retry_backoff: float = 0.5


@attrs.frozen
class RoutePart:
    """The part of one route a shard runs: ``route`` carries only the episodes still
    owed, and ``indices[j]`` is the planned index of the part's ``j``-th episode.
    ``trial_base`` is the trial of the part's first episode when the run dealt
    it (the route has no ``trial_index_base`` of its own), else ``None``.

    A route of a ticket pool travels whole instead (``indices`` empty): ``owed``
    holds the pool's owed tickets (index ranges), which the shard's routes of
    that pool share as one queue, and ``trial_base`` is the pool's dealt base;
    its episodes come back with the pool's own indices and trials."""

    route: Route
    #: Index ranges, not a tuple: a part of a route of a million episodes stays small.
    indices: IndexRuns
    trial_base: int | None = None
    owed: IndexRuns | None = None

    @property
    def route_id(self) -> str:
        return str(self.route.route_id)


@attrs.frozen
class ShardWork:
    """One shard's share of a run (``attempt`` counts from 1 for its routes' tickets).

    ``contracts`` (plan entry -> env contract identity) is what the run's ledger
    already saw; with it the shard checks each entry's env against it (and
    names the contract of every episode it sends back); ``None``: no ledger."""

    shard_id: str
    attempt: int
    parts: tuple[RoutePart, ...]
    options: RunOptions
    contracts: Mapping[str, Mapping[str, str]] | None = None

    @property
    def route_ids(self) -> tuple[str, ...]:
        return tuple(part.route_id for part in self.parts)


@attrs.frozen
class EpisodeDone:
    """A finished episode, already renumbered to its planned index (``event`` likewise);
    ``env_contract`` names the env contract it ran against (with a ledger)."""

    route_id: str
    result: EpisodeResult
    event: Any = None
    env_contract: Mapping[str, str] | None = None

    @property
    def key(self) -> TicketKey:
        return (self.route_id, self.result.index)


@attrs.frozen
class RouteEnded:
    """How a route's part ended in its shard (``report`` without its episodes)."""

    route_id: str
    status: Literal["completed", "failed", "cancelled"]
    error: BaseException | None
    env: str
    model: str
    wall_s: float
    report: RouteReport | None
    #: Sessions the shard reran after a broken connection (``retries=``).
    retries: int = 0
    #: The env contract the part ran against (``RouteOutcome.env_contract``).
    env_contract: Mapping[str, str] | None = None


@attrs.frozen
class HookCall:
    """A lifecycle event the shard saw, for the caller's hooks (progress bars, logs)."""

    name: Literal["session_started", "session_ended", "session_failed"]
    event: Any


@attrs.frozen
class ShardEnded:
    """The shard ran to its end (its stream is complete)."""

    shard_id: str


Item = EpisodeDone | HookCall | RouteEnded | ShardEnded
