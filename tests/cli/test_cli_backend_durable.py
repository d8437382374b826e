"""Issue 24 item 11: --ledger, --resume and --retries work with --backend processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .._cli import run_cli

POLICY = "tests._durable_policy:angle_policy"
ARGS = ["run", "--env", "CartPole-v1", "--env", "CartPole-v1", "--model", POLICY]
ARGS += ["--seeds", "0:6", "--no-progress", "--backend", "processes", "--shards", "2"]


def _keys(path: Path) -> list[tuple[int, int, float]]:
    report = json.loads(path.read_text())
    return sorted(
        (ep["seed"], ep["steps"], ep["reward"]) for r in report["routes"] for ep in r["episodes"]
    )


@pytest.mark.slow
def test_a_processes_run_keeps_a_ledger_and_resumes_it(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    first = run_cli(*ARGS, "--ledger", str(ledger), "--retries", "2", "--json", str(out))
    assert first.returncode == 0, first.stderr
    whole = _keys(out)
    lines = ledger.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 6
    ledger.write_text("".join(lines[:3]))  # as if the run had stopped after two episodes
    again = run_cli(*ARGS, "--ledger", str(ledger), "--resume", "--json", str(out))
    assert again.returncode == 0, again.stderr
    assert f"resuming {ledger}: 2 of 6 episodes done, 4 to go" in again.stderr
    assert _keys(out) == whole
    assert len(ledger.read_text().splitlines()) == 1 + 6 + 1  # + the resume line


def test_a_processes_run_refuses_a_ledger_it_would_overwrite(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    ledger.write_text("something\n")
    result = run_cli(*ARGS, "--ledger", str(ledger))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ledger ")
    assert ledger.read_text() == "something\n"


def test_dynamic_dealing_with_a_backend_says_why_not() -> None:
    result = run_cli(*ARGS, "--dealing", "dynamic")
    assert result.returncode == 2
    assert "--dealing dynamic goes with --backend local" in result.stderr
