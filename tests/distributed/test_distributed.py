"""Distributed runs without Ray: the planner, the coordinator over threads and processes.

Crashes are injected two ways: a thread shard that stops delivering after N
items (as if its worker were killed), and a real SIGKILL of a shard process.
Either way every planned ticket must appear exactly once and match a local run.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import run_distributed
from rlmesh_trio.distributed import ThreadBackend
from rlmesh_trio.distributed._planner import owed_part, plan_shards

from .._dist_helpers import (
    KillingProcessBackend,
    episode_keys,
    gymnasium_episode,
    inprocess_routes,
    make_cartpole,
    serve_env_process,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def test_shards_balance_episodes_and_keep_route_order() -> None:
    routes = [
        rt.Route(env="127.0.0.1:1", model="m:1", episodes=n, route_id=f"r{i}")
        for i, n in enumerate([8, 1, 1, 4, 4])
    ]
    groups = plan_shards(routes, 2, batch_predicts=False)
    loads = sorted(sum(r.episodes or 0 for r in g) for g in groups)
    assert loads == [9, 9]
    for group in groups:
        ids = [r.route_id for r in group]
        assert ids == sorted(ids)


def test_routes_sharing_a_model_stay_together_when_predicts_batch() -> None:
    routes = [
        rt.Route(
            env=f"127.0.0.1:{i + 1}", model=f"127.0.0.1:{900 + i % 2}", episodes=2, route_id=f"r{i}"
        )
        for i in range(6)
    ]
    for group in plan_shards(routes, 4, batch_predicts=True):
        assert len({r.model for r in group}) == 1
    assert len(plan_shards(routes, 4, batch_predicts=True)) == 2


def test_an_owed_part_keeps_seeds_and_trials_of_its_tickets() -> None:
    route = rt.Route(
        env="a:1", model="b:2", seeds=[10, 11, 12, 13], route_id="r", trial_index_base=5
    )
    part = owed_part(route, [2, 3])
    assert part.indices == (2, 3)
    assert part.route.seeds == (12, 13)
    assert part.route.trial_index_base == 7


def test_a_route_that_cannot_pickle_is_refused_up_front_by_name() -> None:
    route = rt.Route(env=make_cartpole, model=lambda obs: 0, seeds=[1], route_id="local-lambda")
    with pytest.raises(rt.InvalidSpec, match="route local-lambda: cannot be sent to a shard"):
        run_distributed([route], "processes")


def test_a_route_without_a_budget_is_refused() -> None:
    with pytest.raises(rt.InvalidSpec, match="needs seeds or an episode count"):
        run_distributed([rt.Route(env=make_cartpole, model=abs)], "threads")


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(rt.InvalidSpec, match="backend must be"):
        run_distributed(inprocess_routes(1, 1), "dask")  # type: ignore[arg-type]


def test_threads_match_a_local_run_episode_for_episode() -> None:
    routes = inprocess_routes(4, 3)
    local = rt.run(routes)
    distributed = run_distributed(routes, "threads", shards=2)
    assert episode_keys(distributed) == episode_keys(local)
    assert [o.status for o in distributed.routes] == ["completed"] * 4
    assert distributed.total_steps == local.total_steps


@pytest.mark.parametrize("batch_predicts", [None, False])
def test_a_shard_fuses_its_routes_sharing_an_in_process_policy_unless_opted_out(
    batch_predicts: bool | None,
) -> None:
    seen = {"calls": 0}

    def balance(obs: Any) -> np.ndarray:
        seen["calls"] += 1
        rows = np.asarray(obs)
        return (rows[:, 2] + 0.5 * rows[:, 3] > 0).astype(np.int64)

    model = rt.policy(batched=balance)
    routes = rt.shard([make_cartpole() for _ in range(6)], model, range(12), max_episode_steps=30)
    local = rt.run(routes, batch_predicts=False)
    seen["calls"] = 0
    options: dict[str, Any] = {} if batch_predicts is None else {"batch_predicts": False}
    distributed = run_distributed(routes, "threads", shards=2, **options)
    assert episode_keys(distributed) == episode_keys(local)
    # Fused: one batched call per round of a shard's three routes; opted out: one per step.
    steps = distributed.total_steps
    assert (seen["calls"] < steps) if batch_predicts is None else (seen["calls"] == steps)


def test_a_shard_that_dies_has_only_its_owed_tickets_replayed() -> None:
    routes = inprocess_routes(4, 4)
    first_attempt_dies = ThreadBackend(crash_after=lambda w: 3 if w.attempt == 1 else None)
    report = run_distributed(routes, first_attempt_dies, shards=2)
    assert [o.status for o in report.routes] == ["completed"] * 4
    keys = episode_keys(report)
    assert len(keys) == len(set((k[0], k[1]) for k in keys)) == 16
    for _route, _index, seed, steps, reward in keys:
        assert (steps, reward) == gymnasium_episode(int(seed or 0))


def test_a_route_whose_shard_keeps_dying_fails_with_shard_lost() -> None:
    always_dies = ThreadBackend(crash_after=lambda w: 1)
    with pytest.raises(rt.RunFailed) as caught:
        run_distributed(inprocess_routes(2, 3), always_dies, shards=1, max_shard_attempts=2)
    error = caught.value.primary
    assert isinstance(error, rt.ShardLost) and error.attempts == 2
    statuses = {o.status for o in caught.value.report.routes}
    assert "failed" in statuses
    report = caught.value.report
    keys = [(o.route_id, e.index) for o in report.routes for e in o.episodes]
    assert len(keys) == len(set(keys))


def test_isolate_keeps_the_other_routes_going() -> None:
    good = inprocess_routes(2, 2)
    bad = rt.Route(env="127.0.0.1:9", model=good[0].model, seeds=[0], route_id="bad")
    report = run_distributed([*good, bad], "threads", shards=3, on_failure="isolate")
    assert [o.status for o in report.routes] == ["completed", "completed", "failed"]
    assert report.total_episodes == 4


def test_shard_lost_pickles_with_its_fields() -> None:
    error = rt.ShardLost("r1", "shard-3", 2, "worker died")
    again = pickle.loads(pickle.dumps(error))
    assert (again.route_id, again.shard_id, again.attempts, again.detail) == (
        "r1",
        "shard-3",
        2,
        "worker died",
    )
    assert str(again) == str(error)


@pytest.mark.slow
def test_processes_match_a_local_run() -> None:
    routes = inprocess_routes(3, 2)
    assert episode_keys(run_distributed(routes, "processes", shards=2)) == episode_keys(
        rt.run(routes)
    )


@pytest.mark.slow
def test_a_sigkilled_shard_process_leaves_every_seed_exactly_once() -> None:
    with serve_env_process() as a, serve_env_process() as b:
        routes = [
            rt.Route(env=address, model=inprocess_routes(1, 1)[0].model, seeds=seeds, route_id=rid)
            for rid, address, seeds in [
                ("a", a.address, range(0, 12)),
                ("b", b.address, range(12, 24)),
            ]
        ]
        backend = KillingProcessBackend(after=2)
        report = run_distributed(routes, backend, shards=2)
    assert backend.killed, "no shard was killed"
    assert [o.status for o in report.routes] == ["completed", "completed"]
    seen = [e.seed for e in report.episodes]
    assert sorted(seen) == list(range(24))
    for episode in report.episodes:
        assert (episode.steps, episode.reward) == gymnasium_episode(int(episode.seed or 0))


def test_a_ledger_from_a_crashed_sharded_run_resumes_locally(tmp_path: Path) -> None:
    routes = inprocess_routes(3, 4)
    ledger = tmp_path / "run.jsonl"
    crashes = ThreadBackend(crash_after=lambda w: 2)
    partial = run_distributed(
        routes, crashes, shards=3, max_shard_attempts=1, on_failure="isolate", ledger=ledger
    )
    assert 0 < partial.total_episodes < 12
    on_disk = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert on_disk[0]["schema"] == "rlmesh-trio.ledger"
    assert len([r for r in on_disk if r.get("type") == "episode"]) == partial.total_episodes
    resumed = rt.run(routes, ledger=ledger, resume=True)
    assert episode_keys(resumed) == episode_keys(rt.run(routes))
    assert resumed.meta is not None and resumed.meta.resumed_episodes == partial.total_episodes


def test_a_local_ledger_resumes_on_shards_with_the_endpoint_moved(tmp_path: Path) -> None:
    good = inprocess_routes(2, 3)
    broken = rt.Route(env="127.0.0.1:9", model=good[0].model, seeds=range(6, 9), route_id="r2")
    ledger = tmp_path / "run.jsonl"
    first = rt.run([*good, broken], on_failure="isolate", ledger=ledger)
    assert first.total_episodes == 6
    fixed = [*good, inprocess_routes(3, 3)[2]]  # same route id and seeds, another endpoint
    resumed = run_distributed(fixed, "threads", shards=2, ledger=ledger, resume=True)
    assert episode_keys(resumed) == episode_keys(rt.run(fixed))
    before = ledger.read_bytes()
    with pytest.raises(rt.InvalidSpec, match="already holds a run"):
        run_distributed(fixed, "threads", ledger=ledger)
    assert ledger.read_bytes() == before  # a ledger is never overwritten
