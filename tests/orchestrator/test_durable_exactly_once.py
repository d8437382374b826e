"""Issue 15 item 5: exactly once, whatever mix of crashes, interrupts, resumes and retries.

A runner subprocess (``rlmesh-trio run --ledger L --resume --retries N``)
evaluates a few hundred seeded CartPole episodes over three env server
subprocesses. A seeded ``random.Random`` picks, each time the ledger has
grown by a few episodes, one of: SIGKILL the runner, SIGINT the runner,
SIGKILL (and restart) an env server, or nothing. The runner is started again
with ``--resume`` until it exits 0. Then every planned ticket must appear
exactly once in the final report and at most once in the ledger, and the
episodes must equal gymnasium's own, seed for seed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import read_ledger

from .._durable_policy import gymnasium_episode
from .._restartable import REPO, Kind, RestartableEnv

#: Bounds the whole test (it normally needs a fraction of this).
DEADLINE = 150.0


def _ledger_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return handle.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _start_runner(addresses: Sequence[str], episodes: int, tmp: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "rlmesh_trio.cli", "run"]
    for address in addresses:
        argv += ["--env", address]
    argv += ["--model", "tests._durable_policy:angle_policy", "--seeds", f"0:{episodes}"]
    argv += ["--ledger", str(tmp / "run.jsonl"), "--resume", "--json", str(tmp / "out.json")]
    argv += ["--retries", "1000", "--retry-backoff", "0.05", "--no-progress"]
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))
    return subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _wait_for_growth(
    runner: subprocess.Popen[bytes], ledger: Path, target: int, deadline: float
) -> bool:
    """Until the ledger has ``target`` lines (True) or the runner ended (False).

    Polls the file: the runner is another process and the file is the event.
    """
    while _ledger_lines(ledger) < target:
        if runner.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise AssertionError("the runner made no progress before the deadline")
        time.sleep(0.01)
    return True


def _chaos(kind: Kind, episodes: int, disruptions: int, seed: int, tmp: Path) -> list[str]:
    rng = random.Random(seed)
    ledger = tmp / "run.jsonl"
    deadline = time.monotonic() + DEADLINE
    actions: list[str] = []
    servers = [RestartableEnv(kind) for _ in range(3)]
    try:
        for server in servers:
            server.start()
        addresses = [server.address for server in servers]
        while True:
            runner = _start_runner(addresses, episodes, tmp)
            # Disrupt this runner until one disruption ends it (or the budget is spent).
            while len(actions) < disruptions and runner.poll() is None:
                target = _ledger_lines(ledger) + rng.randint(3, 25)
                if not _wait_for_growth(runner, ledger, target, deadline):
                    break
                actions.append(_disrupt(rng, runner, servers))
                if actions[-1].endswith("runner"):
                    break
            code = runner.wait(timeout=max(1.0, deadline - time.monotonic()))
            stderr = runner.stderr.read().decode(errors="replace") if runner.stderr else ""
            # A SIGINT that lands after the run, while the summary prints, is Python's own
            # KeyboardInterrupt (exit 1): still an interrupt, and the ledger is complete.
            late_sigint = actions[-1:] == ["sigint-runner"] and "KeyboardInterrupt" in stderr
            ok = code in (0, 130, -signal.SIGKILL) or late_sigint
            assert ok, f"runner exit {code}: {stderr[-2000:]}"
            if code == 0:
                return actions
    finally:
        for server in servers:
            server.kill()


def _disrupt(
    rng: random.Random, runner: subprocess.Popen[bytes], servers: list[RestartableEnv]
) -> str:
    choice = rng.choice(["kill-runner", "sigint-runner", "kill-server", "kill-server", "none"])
    if choice == "kill-runner":
        runner.kill()
    elif choice == "sigint-runner":
        runner.send_signal(signal.SIGINT)
    elif choice == "kill-server":
        victim = rng.randrange(len(servers))
        servers[victim].kill()
        servers[victim].start()  # same port; the runner retries meanwhile
        choice += f"-{victim}"
    return choice


def _check_exactly_once(tmp: Path, episodes: int) -> None:
    contents = read_ledger(tmp / "run.jsonl")
    tickets = [entry.ticket for entry in contents.entries]
    assert len(tickets) == len(set(tickets)) == episodes, "a ticket is missing or doubled"
    report = json.loads((tmp / "out.json").read_text())
    seen = [ep["seed"] for route in report["routes"] for ep in route["episodes"]]
    assert sorted(seen) == list(range(episodes)), "the report lacks or repeats a seed"
    got = sorted(
        (ep["seed"], ep["steps"], ep["reward"], ep["terminated"], ep["truncated"])
        for route in report["routes"]
        for ep in route["episodes"]
    )
    assert got == [gymnasium_episode(s) for s in range(episodes)]
    rebuilt = rt.load_ledger(tmp / "run.jsonl")
    assert rebuilt.ok and sorted(ep.seed or 0 for ep in rebuilt.episodes) == sorted(seen)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_exactly_once_under_kills_interrupts_resumes_and_retries(tmp_path: Path) -> None:
    actions = _chaos("ours", episodes=300, disruptions=8, seed=15, tmp=tmp_path)
    kinds = {action.split("-")[0] + "-" + action.split("-")[1] for action in actions}
    assert {"kill-runner", "sigint-runner", "kill-server"} <= kinds, actions
    _check_exactly_once(tmp_path, 300)


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.timeout(240)
def test_exactly_once_over_rlmesh_env_servers(tmp_path: Path) -> None:
    pytest.importorskip("rlmesh")
    _chaos("rlmesh", episodes=120, disruptions=4, seed=12, tmp=tmp_path)
    _check_exactly_once(tmp_path, 120)
