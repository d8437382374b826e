"""Issue 24 item 1 from the command line: every episode of a run walks its own trial."""

from __future__ import annotations

from pathlib import Path

import pytest

from .._cli import run_to_json

POLICY = "tests._durable_policy:angle_policy"


def _trials(data: dict[str, object]) -> list[int]:
    routes = data["routes"]
    assert isinstance(routes, list)
    return [ep["trial"] for route in routes for ep in route["episodes"]]


def test_run_gives_each_route_its_own_trials_by_default(tmp_path: Path) -> None:
    args = ["--env", "CartPole-v1", "--env", "CartPole-v1", "--env", "CartPole-v1"]
    data = run_to_json(tmp_path / "r.json", *args, "--model", POLICY, "--episodes", "7")
    trials = _trials(data)
    assert len(trials) == 7 and sorted(trials) == list(range(7))


@pytest.mark.slow
def test_a_processes_run_deals_trials_over_the_whole_run(tmp_path: Path) -> None:
    args = ["--env", "CartPole-v1", "--env", "CartPole-v1", "--model", POLICY]
    args += ["--seeds", "0:6", "--backend", "processes", "--shards", "2"]
    data = run_to_json(tmp_path / "r.json", *args)
    assert sorted(_trials(data)) == list(range(6))
