"""Issue 24 item 2 from the command line: --resume checks the env and model, and says what
it resumed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .._cli import run_cli

POLICY = "tests._durable_policy:angle_policy"


def _run(
    ledger: Path, env: str, model: str = POLICY, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "run", "--env", env, "--model", model, "--seeds", "0:4", "--ledger", str(ledger),
        "--no-progress", *extra,
    )  # fmt: skip


def _cut(ledger: Path, episodes: int) -> None:
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(lines[: 1 + episodes]))


def test_resume_with_another_env_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    first = _run(ledger, "CartPole-v1")
    assert first.returncode == 0, first.stderr
    _cut(ledger, 1)
    result = _run(ledger, "Acrobot-v1", POLICY, "--resume")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in result.stderr
    assert "env differs (ledger: CartPole-v1; this run: Acrobot-v1)" in last


def test_resume_with_another_model_is_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    assert _run(ledger, "CartPole-v1").returncode == 0
    _cut(ledger, 1)
    result = _run(ledger, "CartPole-v1", "random", "--resume")
    assert result.returncode == 2
    assert "model differs" in result.stderr


def test_resume_prints_what_it_resumed(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    assert _run(ledger, "CartPole-v1").returncode == 0
    _cut(ledger, 3)
    result = _run(ledger, "CartPole-v1", POLICY, "--resume")
    assert result.returncode == 0, result.stderr
    assert f"resuming {ledger}: 3 of 4 episodes done, 1 to go" in result.stderr
