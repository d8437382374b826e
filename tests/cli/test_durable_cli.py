"""Issue 15 on the CLI: --ledger, --resume, --retries, --retry-backoff, --dealing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlmesh_trio as rt

from .._cli import run_cli, serving
from .._durable_policy import gymnasium_episode

POLICY = "tests._durable_policy:angle_policy"


def test_help_lists_the_long_run_options() -> None:
    result = run_cli("run", "--help")
    for option in ("--ledger", "--resume", "--retries", "--retry-backoff", "--dealing"):
        assert option in result.stdout


def test_non_empty_ledger_without_resume_exits_2_and_is_untouched(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    first = run_cli(
        "run", "--env", "CartPole-v1", "--model", POLICY, "--seeds", "0:4", "--ledger", str(ledger)
    )
    assert first.returncode == 0, first.stderr
    before = ledger.read_bytes()
    again = run_cli(
        "run", "--env", "CartPole-v1", "--model", POLICY, "--seeds", "0:4", "--ledger", str(ledger)
    )
    assert again.returncode == 2
    assert again.stderr.startswith("error: ") and "--resume" in again.stderr
    assert ledger.read_bytes() == before


def test_resume_needs_a_ledger_and_a_different_plan_is_named(tmp_path: Path) -> None:
    alone = run_cli("run", "--env", "CartPole-v1", "--model", POLICY, "--seeds", "0:2", "--resume")
    assert alone.returncode == 2 and "--resume needs --ledger" in alone.stderr
    ledger = tmp_path / "l.jsonl"
    base = ["run", "--env", "CartPole-v1", "--model", POLICY, "--ledger", str(ledger)]
    assert run_cli(*base, "--seeds", "0:3").returncode == 0
    other = run_cli(*base, "--seeds", "0:4", "--resume")
    assert other.returncode == 2 and "route-0: episodes differ" in other.stderr


@pytest.mark.slow
def test_resume_over_a_served_env_completes_the_plan(tmp_path: Path) -> None:
    ledger, out = tmp_path / "l.jsonl", tmp_path / "out.json"
    with serving("serve-env", "CartPole-v1") as a, serving("serve-env", "CartPole-v1") as b:
        args = ["run", "--env", a, "--env", b, "--model", POLICY, "--seeds", "0:12"]
        args += ["--ledger", str(ledger), "--json", str(out), "--dealing", "dynamic"]
        args += ["--retries", "2", "--retry-backoff", "0.1", "--no-progress"]
        assert run_cli(*args).returncode == 0
        lines = ledger.read_text().splitlines(keepends=True)
        ledger.write_text("".join(lines[:5]) + lines[5][:10])  # as if killed mid-line
        resumed = run_cli(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(out.read_text())
    assert report["schema"] == "rlmesh-trio.report"
    assert report["run"]["resumed_episodes"] == 4 and "--resume" in report["run"]["argv"]
    got = sorted(
        (e["seed"], e["steps"], e["reward"], e["terminated"], e["truncated"])
        for r in report["routes"]
        for e in r["episodes"]
    )
    assert got == [gymnasium_episode(s) for s in range(12)]
    assert rt.load_ledger(ledger).total_episodes == 12


def test_report_rebuilds_the_summary_json_and_html_from_a_ledger_alone(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "run.json"
    policy = "rlmesh_trio.inprocess._demo_policy:cartpole_policy"
    ran = run_cli(
        "run",
        "--env",
        "CartPole-v1",
        "--model",
        policy,
        "--seeds",
        "0:3",
        "--no-progress",
        "--ledger",
        str(ledger),
        "--json",
        str(out),
    )
    assert ran.returncode == 0, ran.stderr
    html = tmp_path / "from-ledger.html"
    rebuilt = run_cli("report", str(ledger), "--html", str(html))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "rlmesh-trio report: run.jsonl" in rebuilt.stdout
    assert html.stat().st_size > 0
    from_json = json.loads(out.read_text())["routes"][0]["episodes"]
    from_ledger = rt.load_ledger(ledger).routes[0].episodes
    assert [(e["seed"], e["steps"], e["reward"]) for e in from_json] == [
        (e.seed, e.steps, e.reward) for e in from_ledger
    ]
