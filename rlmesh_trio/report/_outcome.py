"""How each route of a run ended, and where the run came from: the report's parts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from ..runtime._results import EpisodeResult, RouteReport
from ._finite import raw_float

__all__ = ["RouteOutcome", "RouteSet", "RouteStatus", "RunMeta"]

RouteStatus = Literal["completed", "failed", "cancelled"]


@attrs.frozen
class RunMeta:
    """Where a run came from: package versions, argv, start time (UTC, ISO 8601), its plan.

    ``plan_digest``/``plan`` are ``None`` for a run with an unbounded route;
    ``ledger`` is the ledger's path when the run kept one,
    ``resumed_episodes`` how many episodes came from it rather than this run,
    ``ledger_torn_bytes`` the size of a torn last line cut off on resume,
    and ``resumed`` the line a resume logs (``resuming LEDGER: 37 of 120
    episodes done, 83 to go``; ``None`` for a run that resumed nothing).
    """

    versions: Mapping[str, str]
    argv: tuple[str, ...]
    started_at: str
    plan_digest: str | None = None
    plan: Mapping[str, Any] | None = attrs.field(default=None, repr=False)
    ledger: str | None = None
    resumed_episodes: int = 0
    ledger_torn_bytes: int = 0
    resumed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "versions": dict(self.versions),
            "argv": list(self.argv),
            "started_at": self.started_at,
            "plan_digest": self.plan_digest,
            "plan": self.plan,
            "ledger": self.ledger,
            "resumed_episodes": self.resumed_episodes,
            "ledger_torn_bytes": self.ledger_torn_bytes,
            "resumed": self.resumed,
        }


@attrs.frozen(repr=False)
class RouteOutcome:
    """How one route ended. ``report`` holds its episodes even when it failed.

    ``wall_s`` is the time from the route's start (after any wait for a
    concurrency slot) to its end; 0 for a route that never started.
    ``retries`` counts the sessions the route reran after a broken connection.
    ``env`` is a label (an address for a served env); ``env_contract`` is what
    the env said it is in its handshake: ``{"env_id": "CartPole-v1", "spaces":
    <digest of its action and observation spaces>}`` (``None`` when the route
    never reached an episode, or in a report written before it was recorded).
    ``resumed_steps`` are the steps of the episodes a resumed run took from its
    ledger: counted in ``total_steps``, not in ``steps_per_s`` (``run_steps``
    over ``wall_s``, the steps this run made in the time it took them).
    """

    route_id: str
    env: str
    model: str
    status: RouteStatus
    error: BaseException | None
    report: RouteReport | None
    wall_s: float = 0.0
    retries: int = 0
    env_contract: Mapping[str, str] | None = None
    resumed_steps: int = 0

    def __repr__(self) -> str:
        # Counts, not contents (the episodes are in ``report``).
        error = "None" if self.error is None else f"{type(self.error).__name__}(...)"
        return (
            f"RouteOutcome(route_id={self.route_id!r}, status={self.status!r}, "
            f"episodes={self.total_episodes}, steps={self.total_steps}, error={error}, "
            f"wall_s={self.wall_s:.3f})"
        )

    @property
    def episodes(self) -> Sequence[EpisodeResult]:
        return self.report.episodes if self.report is not None else ()

    @property
    def total_steps(self) -> int:
        return self.report.total_steps if self.report is not None else 0

    @property
    def run_steps(self) -> int:
        """The steps this run made (``total_steps`` less those taken from a ledger)."""
        return max(self.total_steps - self.resumed_steps, 0)

    @property
    def steps_per_s(self) -> float | None:
        """``run_steps`` over ``wall_s``; ``None`` when this run made no step on the route
        (a resumed route the ledger had finished) or took no time."""
        steps = self.run_steps
        return steps / self.wall_s if steps > 0 and self.wall_s > 0 else None

    @property
    def total_episodes(self) -> int:
        return len(self.episodes)

    def to_dict(self) -> dict[str, Any]:
        error = None
        if self.error is not None:
            error = {"type": type(self.error).__name__, "message": str(self.error)}
        return {
            "route_id": self.route_id,
            "env": self.env,
            "model": self.model,
            "status": self.status,
            "error": error,
            "total_steps": self.total_steps,
            "total_episodes": self.total_episodes,
            "retries": self.retries,
            "wall_s": self.wall_s,
            "resumed_steps": self.resumed_steps,
            "env_contract": dict(self.env_contract) if self.env_contract is not None else None,
            "episodes": [_episode_dict(ep) for ep in self.episodes],
        }


def _episode_dict(ep: EpisodeResult) -> dict[str, Any]:
    record = {
        "index": ep.index,
        "episode_id": ep.episode_id,
        "env_index": ep.env_index,
        "seed": ep.seed,
        "steps": ep.steps,
        "reward": ep.reward,
        "terminated": ep.terminated,
        "truncated": ep.truncated,
        "success": ep.success,
        "duration_s": ep.duration_s,
        "predict_ms": ep.predict_ms,
        "step_ms": ep.step_ms,
        "trial": ep.trial,
        "attempts": ep.attempts,
    }
    if not math.isfinite(ep.reward):
        # Strict JSON has no NaN: the number becomes null, the raw value stays readable.
        record["reward"] = None
        record["reward_raw"] = raw_float(ep.reward)
    return record


class RouteSet(Protocol):
    """What the statistics and the bundle read from a run: its route outcomes, in route order.

    A :class:`~rlmesh_trio.RunReport` is one.
    """

    @property
    def routes(self) -> Sequence[RouteOutcome]: ...
