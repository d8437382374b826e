"""Small things the CLI prints: intervals of negative returns, a ledger's env, "1 episode"."""

from __future__ import annotations

import re
from pathlib import Path

from tests._cli import run_cli


def test_report_of_a_ledger_names_the_env_and_reads_negative_intervals(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    ran = run_cli(
        "run", "--env", "Pendulum-v1", "--model", "random", "--episodes", "3",
        "--ledger", str(ledger), "--no-progress",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = run_cli("report", str(ledger))
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.strip().startswith("route-0")][:1]
    assert "Pendulum-v1" in row and " ? " not in row
    # Both ends negative: "-1,402 to -1,178", never "-1,402–-1,178".
    assert re.search(r"-[\d,.]+ to -[\d,.]+", result.stdout), result.stdout
    assert "–" not in result.stdout


def test_compare_counts_one_episode_in_the_singular(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    for path, episodes in ((one, "1"), (two, "2")):
        ran = run_cli(
            "run", "--env", "CartPole-v1", "--model", "random", "--episodes", episodes,
            "--json", str(path), "--no-progress",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
    result = run_cli("compare", str(one), str(two))
    lines = result.stdout.splitlines()
    assert ": 1 episode, mean return" in lines[0] and ": 2 episodes, mean return" in lines[1]
