"""Issue 24 item 11: dynamic dealing (a ticket pool) on shards, from the Python API.

A pool runs whole in one shard (its queue lives in one process); the
coordinator keeps the pool's book, so every ticket is delivered once, with
the seeds and trials a local dynamic run gives, across SIGKILLed shards,
ledgers, resumes and retries.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

import rlmesh_trio as rt
from rlmesh_trio import run_distributed
from rlmesh_trio.distributed._planner import owed_part, plan_shards
from rlmesh_trio.distributed._state import books_of
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

from .._dist_helpers import KillingProcessBackend, gymnasium_episode, make_cartpole
from .._restartable import RestartableEnv

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _pool(endpoints: int, seeds: range, **options: Any) -> list[rt.Route]:
    envs = [make_cartpole] * endpoints
    return rt.shard(envs, cartpole_policy, seeds, dealing="dynamic", **options)


def _tickets(report: rt.RunReport) -> list[tuple[int, int | None, int | None]]:
    """(index, seed, trial) of every episode, sorted: each ticket must appear once."""
    return sorted((e.index, e.seed, e.trial) for e in report.episodes)


def test_a_pool_stays_in_one_shard_and_counts_its_budget_once() -> None:
    pool = _pool(3, range(30), route_id_prefix="p")
    alone = [rt.Route(env="127.0.0.1:1", model="m:1", episodes=n, route_id=f"s{n}") for n in (9, 8)]
    groups = plan_shards([*pool, *alone], 3, batch_predicts=False)
    assert [[r.route_id for r in g] for g in groups] == [["p-0", "p-1", "p-2"], ["s9"], ["s8"]]


def test_a_pool_and_a_model_it_shares_join_one_group_when_predicts_batch() -> None:
    pool = rt.shard(["127.0.0.1:1", "127.0.0.1:2"], "127.0.0.1:9", range(4), dealing="dynamic")
    other = rt.Route(env="127.0.0.1:3", model="127.0.0.1:9", episodes=2, route_id="o")
    third = rt.Route(env="127.0.0.1:4", model="127.0.0.1:8", episodes=2, route_id="t")
    groups = plan_shards([*pool, other, third], 4, batch_predicts=True)
    assert sorted(len(g) for g in groups) == [1, 3]


def test_the_books_owe_index_ranges_not_a_list_as_long_as_the_budget() -> None:
    huge = rt.Route(env="a:1", model="b:2", episodes=10**12, route_id="huge")
    books = books_of([huge, *_pool(2, range(10), route_id_prefix="p")])
    assert books["huge"].owed.runs == (range(10**12),)
    books["huge"].done[5] = None  # type: ignore[assignment]
    assert books["huge"].owed.runs == (range(5), range(6, 10**12))
    part = owed_part(huge, books["huge"].owed)  # what travels to a shard stays small too
    assert part.indices.runs == (range(5), range(6, 10**12)) and part.route.episodes == 10**12 - 1
    assert len(pickle.dumps(part)) < 4096
    assert books["p-0"].pool is books["p-1"].pool is not None


def test_processes_deal_a_pool_like_a_local_run() -> None:
    routes = _pool(3, range(12))
    report = run_distributed(routes, "processes", shards=2)
    assert report.ok and [o.status for o in report.routes] == ["completed"] * 3
    assert _tickets(report) == _tickets(rt.run(routes))
    assert len({e.index for e in report.episodes}) == 12


def test_a_sigkilled_pool_shard_has_only_the_pools_owed_tickets_replayed() -> None:
    routes = _pool(2, range(10))
    backend = KillingProcessBackend(after=2)
    report = run_distributed(routes, backend, shards=2)
    assert backend.killed, "the first shard was never killed"
    assert report.ok
    assert _tickets(report) == _tickets(rt.run(routes))
    for episode in report.episodes:
        assert (episode.steps, episode.reward) == gymnasium_episode(int(episode.seed or 0))


def test_a_pool_ledger_resumes_on_shards_without_duplicates(tmp_path: Path) -> None:
    ledger = tmp_path / "pool.jsonl"
    routes = _pool(2, range(8))
    whole = run_distributed(routes, "processes", ledger=ledger)
    lines = ledger.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 8
    ledger.write_text("".join(lines[:4]))  # as if stopped after three episodes
    again = run_distributed(routes, "processes", ledger=ledger, resume=True)
    assert again.ok and again.meta is not None and again.meta.resumed_episodes == 3
    assert _tickets(again) == _tickets(whole)
    records = [json.loads(line) for line in ledger.read_text().splitlines()[1:]]
    tickets = [r["ticket"] for r in records if r.get("type") == "episode"]
    assert sorted(tickets) == sorted(f"route/{i}" for i in range(8))  # each once, none lost


@pytest.mark.slow
def test_a_dead_endpoint_in_a_pool_retries_while_its_sibling_runs_its_tickets() -> None:
    with RestartableEnv() as doomed, RestartableEnv() as alive:
        routes = rt.shard(
            [doomed.address, alive.address], cartpole_policy, range(30), dealing="dynamic"
        )

        class KillFirst(rt.RuntimeHooks):
            async def episode_completed(self, event: Any) -> None:
                if event.route_id == "route-0":
                    doomed.kill()

        report = run_distributed(
            routes, "processes", hooks=KillFirst(), retries=1000, retry_backoff=0.05
        )
    assert report.ok
    assert sorted(e.seed for e in report.episodes) == list(range(30))
    dead, live = report.routes
    assert dead.retries >= 1 and live.retries == 0
    assert live.report is not None and live.report.total_episodes > 0


@pytest.mark.slow
def test_a_sharded_ledger_names_env_contracts_and_a_resume_on_another_env_is_refused(
    tmp_path: Path,
) -> None:
    """Coordinator-written episodes carry the env contract, and shards check it on resume."""
    ledger = tmp_path / "pool.jsonl"
    with RestartableEnv() as a, RestartableEnv() as b:
        routes = rt.shard([a.address, b.address], cartpole_policy, range(6), dealing="dynamic")
        assert run_distributed(routes, "processes", ledger=ledger).ok
    records = [json.loads(line) for line in ledger.read_text().splitlines()[1:]]
    assert {r["env_contract"]["env_id"] for r in records} == {"CartPole-v1"}
    ledger.write_text("".join(ledger.read_text().splitlines(keepends=True)[:3]))
    with RestartableEnv(env_id="Acrobot-v1") as other:
        routes = rt.shard([other.address], cartpole_policy, range(6), dealing="dynamic")
        with pytest.raises(rt.RunFailed) as caught:
            run_distributed(routes, "processes", ledger=ledger, resume=True)
    error = caught.value.primary
    assert isinstance(error, rt.PlanMismatch)
    assert "env contract differs (ledger: CartPole-v1" in str(error)
    assert "this run: Acrobot-v1" in str(error)
    assert len(ledger.read_text().splitlines()) == 3 + 1  # + the resume line; no Acrobot episode
