"""Issue 24 item 11: --ledger, --resume, --retries and --dealing dynamic work with
--backend processes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from .._cli import CLI, run_cli
from .._restartable import RestartableEnv

POLICY = "tests._durable_policy:angle_policy"
ROOT = Path(__file__).resolve().parents[2]
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


# Issue 24 item 11 changed this: --dealing dynamic was refused with a backend; now the
# ticket pool runs whole in one shard (the refusal's test is replaced by the ones below).
DYNAMIC = ["run", "--env", "CartPole-v1", "--env", "CartPole-v1", "--env", "CartPole-v1"]
DYNAMIC += ["--model", POLICY, "--seeds", "0:9", "--no-progress", "--dealing", "dynamic"]


def _tickets(path: Path) -> list[tuple[int, int, int]]:
    """(seed, trial, index) of every episode in a report: each ticket must appear once."""
    report = json.loads(path.read_text())
    return sorted(
        (ep["seed"], ep["trial"], ep["index"]) for r in report["routes"] for ep in r["episodes"]
    )


@pytest.mark.slow
def test_dynamic_dealing_on_processes_runs_every_ticket_once_as_locally(tmp_path: Path) -> None:
    local, sharded = tmp_path / "local.json", tmp_path / "sharded.json"
    first = run_cli(*DYNAMIC, "--backend", "local", "--json", str(local))
    assert first.returncode == 0, first.stderr
    second = run_cli(*DYNAMIC, "--backend", "processes", "--shards", "2", "--json", str(sharded))
    assert second.returncode == 0, second.stderr
    assert _tickets(sharded) == _tickets(local) == [(s, s, s) for s in range(9)]
    statuses = [r["status"] for r in json.loads(sharded.read_text())["routes"]]
    assert statuses == ["completed"] * 3


@pytest.mark.slow
def test_dynamic_dealing_on_processes_keeps_a_ledger_and_resumes_it(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    args = [*DYNAMIC, "--backend", "processes", "--ledger", str(ledger), "--json", str(out)]
    first = run_cli(*args, "--retries", "2", "--retry-backoff", "0.1")
    assert first.returncode == 0, first.stderr
    whole = _tickets(out)
    lines = ledger.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + 9
    ledger.write_text("".join(lines[:4]) + lines[4][:7])  # stopped after 3, mid-line
    again = run_cli(*args, "--resume", "--retries", "2", "--retry-backoff", "0.1")
    assert again.returncode == 0, again.stderr
    assert f"resuming {ledger}: 3 of 9 episodes done, 6 to go" in again.stderr
    assert _tickets(out) == whole
    records = [json.loads(line) for line in ledger.read_text().splitlines()[1:]]
    tickets = sorted(r["ticket"] for r in records if r.get("type") == "episode")
    assert tickets == sorted(f"route/{i}" for i in range(9))  # none twice, none lost


@pytest.mark.slow
def test_dynamic_dealing_on_processes_retries_a_dead_env_while_the_pool_drains(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.json"
    with RestartableEnv() as dead, RestartableEnv() as live:
        dead.kill()  # nothing listens on its port now: every connect is refused
        args = ["run", "--env", dead.address, "--env", live.address, "--model", POLICY]
        args += ["--seeds", "0:8", "--dealing", "dynamic", "--backend", "processes"]
        args += ["--retries", "1000", "--retry-backoff", "0.05", "--no-progress"]
        result = run_cli(*args, "--json", str(out))
    assert result.returncode == 0, result.stderr
    routes = json.loads(out.read_text())["routes"]
    assert [r["status"] for r in routes] == ["completed", "completed"]
    assert routes[0]["retries"] >= 1 and routes[0]["episodes"] == []  # its tickets went on
    assert sorted(ep["seed"] for ep in routes[1]["episodes"]) == list(range(8))


@pytest.mark.slow
def test_an_interrupted_dynamic_processes_run_resumes_without_duplicates(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    env = "tests._reset_marks_env:make"
    args = ["run", "--env", env, "--env", env, "--model", POLICY, "--seeds", "0:60"]
    args += ["--dealing", "dynamic", "--backend", "processes", "--no-progress"]
    args += ["--ledger", str(ledger), "--json", str(out)]
    proc = subprocess.Popen(
        [*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the shard's envs print on the stderr the CLI shares
            seen.append(line)
            if "env: reset 4" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, "".join(seen) + rest
    done = [json.loads(x) for x in ledger.read_text().splitlines()[1:]]
    assert 0 < len(done) < 60
    again = run_cli(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert f"resuming {ledger}: {len(done)} of 60 episodes done" in again.stderr
    assert _tickets(out) == [(s, s, s) for s in range(60)]
    records = [json.loads(line) for line in ledger.read_text().splitlines()[1:]]
    tickets = sorted(r["ticket"] for r in records if r.get("type") == "episode")
    assert tickets == sorted(f"route/{i}" for i in range(60))  # none twice, none lost
