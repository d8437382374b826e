"""Statistics: seeded bootstrap CIs of the mean and IQM, in RunReport, its JSON and compare."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio.results import compare_rewards, load_run, statistics_block, summarize

from .._results_envs import lean_policy


def test_summary_is_reproducible_and_brackets_the_mean() -> None:
    values = np.random.default_rng(3).normal(10.0, 2.0, size=200)
    first, again = summarize(values), summarize(values)
    assert first == again
    assert first.n == 200 and first.mean == pytest.approx(float(np.mean(values)))
    assert first.std == pytest.approx(float(np.std(values, ddof=1)))
    assert first.mean_ci is not None and first.mean_ci[0] < first.mean < first.mean_ci[1]
    assert first.iqm_ci is not None and first.iqm_ci[0] < first.iqm < first.iqm_ci[1]  # type: ignore[operator]
    other = summarize(values, seed=7)
    assert other.mean_ci != first.mean_ci  # the seed is what fixes the resamples


def test_iqm_ignores_the_tails() -> None:
    values = [1.0] * 10 + [5.0] * 20 + [1000.0] * 10
    assert summarize(values).iqm == pytest.approx(5.0)


def test_degenerate_samples() -> None:
    empty = summarize([])
    assert (empty.n, empty.mean, empty.mean_ci) == (0, None, None)
    one = summarize([4.0])
    assert (one.mean, one.std, one.mean_ci, one.iqm_ci) == (4.0, None, None, None)
    flat = summarize([2.0, 2.0, 2.0])
    assert flat.mean_ci == (2.0, 2.0) and flat.std == 0.0
    assert summarize([1.0, float("nan"), 3.0]).n == 2


def test_compare_says_whether_the_interval_excludes_zero() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 100), rng.normal(3, 1, 100)
    far = compare_rewards(a, b)
    assert far.difference == pytest.approx(float(np.mean(b) - np.mean(a)))
    assert far.ci is not None and far.ci[0] > 0 and far.excludes_zero is True
    near = compare_rewards(a, rng.normal(0, 1, 100))
    assert near.excludes_zero is False
    assert compare_rewards([1.0], [2.0, 3.0]).excludes_zero is None


@pytest.fixture(scope="module")
def cartpole_report() -> rt.RunReport:
    envs = [gym.make("CartPole-v1") for _ in range(2)]
    return rt.run(rt.shard(envs=envs, model=lean_policy, seeds=range(8)))


def test_run_report_statistics_per_route_and_run(cartpole_report: rt.RunReport) -> None:
    stats = cartpole_report.statistics()
    assert set(stats["routes"]) == {"route-0", "route-1"}
    rewards = [ep.reward for ep in cartpole_report.episodes]
    assert stats["run"]["n"] == 8 and stats["run"]["mean"] == pytest.approx(np.mean(rewards))
    low, high = stats["run"]["meanCi"]
    assert low <= stats["run"]["mean"] <= high
    assert stats == statistics_block(cartpole_report)  # seeded: same figures every time
    assert cartpole_report.to_dict()["statistics"] == stats


def test_json_report_round_trips(cartpole_report: rt.RunReport, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(cartpole_report.to_json())
    loaded = load_run(path)
    assert loaded.to_dict() == json.loads(path.read_text())
    assert loaded.episodes == cartpole_report.episodes
    assert loaded.telemetry == cartpole_report.telemetry
    assert rt.RunReport.from_json(path.read_text()).to_dict() == loaded.to_dict()


def test_loading_bad_input_names_the_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(rt.InvalidSpec, match=r"nope\.json: cannot read"):
        load_run(missing)
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    with pytest.raises(rt.InvalidSpec, match=r"junk\.json: not JSON"):
        load_run(junk)
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(rt.InvalidSpec, match="not an rlmesh-trio run report"):
        load_run(other)
    bad = tmp_path / "bad.json"
    bad.write_text('{"routes": [{"route_id": "r", "status": "exploded"}]}')
    with pytest.raises(rt.InvalidSpec, match="route r: status must be one of"):
        load_run(bad)
