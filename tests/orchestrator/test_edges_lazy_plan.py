"""Issue 24 item 14: a plan of millions of episodes costs no memory before they run."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import gymnasium as gym
import trio

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._plan import make_plan
from rlmesh_trio.orchestrator._pool import TicketQueue
from rlmesh_trio.orchestrator._tickets import IndexRuns

from .._durable_policy import angle_policy

#: Far below what one object per planned episode would take (10**7 tickets: gigabytes).
BOUND = 4_000_000


def cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1")


class StopAtFirstEpisode(rt.RuntimeHooks):
    """Records the first episode's index and the memory peak when it starts; then cancels."""

    def __init__(self, scope: trio.CancelScope) -> None:
        self.scope = scope
        self.first: int | None = None
        self.peak = 0

    async def episode_started(self, event: Any) -> None:
        if self.first is None:
            self.first = event.episode_index
            self.peak = tracemalloc.get_traced_memory()[1]
            self.scope.cancel()


def _peak_to_first_episode(episodes: int, **run: Any) -> tuple[int | None, int]:
    route = rt.Route(env=cartpole, model=angle_policy, episodes=episodes, route_id="r")

    async def main() -> StopAtFirstEpisode:
        with trio.CancelScope() as scope:
            hooks = StopAtFirstEpisode(scope)
            await rt.run_routes([route], hooks=hooks, handle_sigint=False, **run)
        return hooks

    tracemalloc.start()
    try:
        hooks = trio.run(main)
        whole_run = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return hooks.first, max(hooks.peak, whole_run)


def test_ten_million_episodes_start_at_once_in_little_memory() -> None:
    first, peak = _peak_to_first_episode(10**7)
    assert first == 0
    assert peak < BOUND, f"planning 10**7 episodes peaked at {peak / 1e6:.1f} MB"


def test_a_resumed_million_episode_ledger_plans_in_little_memory(tmp_path: Path) -> None:
    ledger = tmp_path / "big.jsonl"
    first, _ = _peak_to_first_episode(10**6, ledger=ledger)
    assert first == 0
    first, peak = _peak_to_first_episode(10**6, ledger=ledger, resume=True)
    assert first == 0 and peak < BOUND


def test_the_queue_keeps_index_ranges_not_tickets() -> None:
    routes = [rt.Route(env="a:1", model="m:1", episodes=10**9, route_id="r", ticket_pool="p")]
    entry = make_plan(routes, ["r"]).entry("r")
    queue = TicketQueue.lazy(entry.ticket, 10**9, done=[0, 5], routes=1, dynamic=True)
    assert len(queue) == 10**9 - 2
    chunk = queue.claim()  # one contiguous run: its trials are a range
    assert [t.index for t in chunk] == [1, 2, 3, 4] and chunk.trials() == range(1, 5)
    queue.release(chunk.indices.without([1, 2]))
    assert [t.index for t in queue.claim()] == [3, 4]
    assert queue.claim()[:3] == [entry.ticket(i) for i in (6, 7, 8)]


def test_index_runs_cut_and_join() -> None:
    runs = IndexRuns.all_but(10, [3, 4, 8])
    assert list(runs) == [0, 1, 2, 5, 6, 7, 9] and runs.runs == (
        range(3),
        range(5, 8),
        range(9, 10),
    )
    assert list(runs[2:5]) == [2, 5, 6] and runs[-1] == 9 and 7 in runs and 8 not in runs
    assert list(runs.without([0, 6, 9])) == [1, 2, 5, 7]
    assert IndexRuns.of([4, 2, 3, 9]).runs == (range(2, 5), range(9, 10))
