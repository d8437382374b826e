"""``compare``: the documented bootstrap recipe (checked against scipy directly), and the
warnings when two runs differ in more than their models."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from scipy import stats

import rlmesh_trio as rt
from rlmesh_trio.results import compare_rewards, resample_batch, summarize

from .._cli import run_cli


def _documented(samples: tuple[np.ndarray, ...], statistic: object, seed: int) -> tuple[float, ...]:
    """The recipe as the docs write it, called on scipy itself."""
    result = stats.bootstrap(
        samples,
        statistic,  # type: ignore[arg-type]
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        vectorized=True,
        paired=False,
        batch=resample_batch(samples),  # type: ignore[arg-type]
        rng=np.random.default_rng(seed),
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b, axis=axis) - np.mean(a, axis=axis)  # type: ignore[no-any-return]


@pytest.mark.parametrize("size", [40, 4000])  # all resamples at once; in batches
def test_intervals_are_scipy_bootstrap_as_documented(size: int) -> None:
    rng = np.random.default_rng(11)
    a, b = rng.normal(0, 3, size), rng.normal(1, 3, size)
    assert (resample_batch((a, b)) is None) == (size == 40)
    diff = compare_rewards(list(a), list(b), seed=5)
    assert diff.ci == _documented((a, b), _mean_difference, 5)
    mean_ci = summarize(list(a), seed=20240917).mean_ci
    assert mean_ci == _documented((a,), np.mean, 20240917)
    iqm_ci = summarize(list(a)).iqm_ci
    assert iqm_ci == _documented(
        (a,), lambda x, axis: stats.trim_mean(x, 0.25, axis=axis), 20240917
    )


def _run_json(path: Path, env: str, seeds: range, *, cancel_one: bool = False) -> Path:
    report = rt.run(rt.shard(envs=[gym.make(env), gym.make(env)], model=rt.RANDOM, seeds=seeds))
    data = json.loads(report.to_json())
    if cancel_one:  # as an interrupted run writes it
        data["routes"][1]["status"] = "cancelled"
    path.write_text(json.dumps(data))
    return path


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ")]


def test_compare_warns_about_what_differs(tmp_path: Path) -> None:
    base = _run_json(tmp_path / "a.json", "CartPole-v1", range(6))
    same = _run_json(tmp_path / "same.json", "CartPole-v1", range(6))
    result = run_cli("compare", str(base), str(same))
    assert result.returncode == 0 and _warnings(result.stderr) == []

    other_env = _run_json(tmp_path / "acrobot.json", "Acrobot-v1", range(6))
    other_seeds = _run_json(tmp_path / "seeds.json", "CartPole-v1", range(100, 104))
    partial = _run_json(tmp_path / "partial.json", "CartPole-v1", range(6), cancel_one=True)
    envs = _warnings(run_cli("compare", str(base), str(other_env)).stderr)
    assert envs == ["warning: the runs used different envs: A CartPole-v1, B Acrobot-v1"]
    seeds = run_cli("compare", str(base), str(other_seeds))
    assert seeds.returncode == 0 and _warnings(seeds.stderr) == [
        "warning: the runs used different seeds: A 6 seeds in 0..5, "
        "B 4 seeds in 100..103, 0 in common"
    ]
    assert "B - A = " in seeds.stdout  # the comparison is still printed
    assert _warnings(run_cli("compare", str(partial), str(base)).stderr) == [
        "warning: A is partial: 1 of 2 routes did not finish (1 cancelled)"
    ]
