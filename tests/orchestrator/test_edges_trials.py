"""Issue 24 item 1: no two episodes of a run share a trial index (real gymnasium CartPole)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import read_ledger

from .._durable_policy import angle_policy


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def trials(report: rt.RunReport) -> list[int | None]:
    return [ep.trial for ep in report.episodes]


def test_shard_deals_every_route_its_own_trials_by_default(tmp_path: Path) -> None:
    plan = rt.shard([cartpole, cartpole, cartpole], angle_policy, seeds=range(10))
    report = rt.run(plan, ledger=tmp_path / "l.jsonl")
    assert sorted(trials(report)) == list(range(10))  # type: ignore[type-var]
    assert [[ep.trial for ep in o.episodes] for o in report.routes] == [
        [0, 1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
    ]
    # The ledger holds the same trials, and a resume of the same plan agrees with it.
    held = sorted(e.result.trial or 0 for e in read_ledger(tmp_path / "l.jsonl").entries)
    assert held == list(range(10))
    again = rt.run(plan, ledger=tmp_path / "l.jsonl", resume=True)
    assert sorted(trials(again)) == list(range(10))  # type: ignore[type-var]


def test_routes_built_by_hand_get_dealt_blocks_and_an_explicit_base_is_kept() -> None:
    routes = [
        rt.Route(env=cartpole, model=angle_policy, seeds=[1, 2], route_id="a"),
        rt.Route(env=cartpole, model=angle_policy, episodes=3, route_id="b"),
        rt.Route(env=cartpole, model=angle_policy, seeds=[5], route_id="c", trial_index_base=50),
    ]
    report = rt.run(routes)
    by_route = {o.route_id: [ep.trial for ep in o.episodes] for o in report.routes}
    # Dealt blocks start after the highest trial an explicit base claims.
    assert by_route == {"a": [51, 52], "b": [53, 54, 55], "c": [50]}


def test_an_explicit_base_is_dealt_in_blocks_from_there() -> None:
    plan = rt.shard([cartpole, cartpole], angle_policy, episodes=5, trial_index_base=100)
    report = rt.run(plan)
    assert [[ep.trial for ep in o.episodes] for o in report.routes] == [
        [100, 101, 102],
        [103, 104],
    ]


def test_a_dynamic_pool_walks_one_block_of_trials() -> None:
    plan = rt.shard([cartpole, cartpole], angle_policy, seeds=range(6), dealing="dynamic")
    report = rt.run(plan)
    assert sorted(trials(report)) == list(range(6))  # type: ignore[type-var]
