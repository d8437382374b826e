"""Two Ctrl+C: the second, during the cleanup the first started, still leaves the partial
JSON report (written before the CLI exits, without waiting for the cleanup)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._cli import CLI

ROOT = Path(__file__).resolve().parents[2]


def _wait_for(proc: subprocess.Popen[str], text: str, seen: list[str]) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} never came; stderr: {''.join(seen)}")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_second_ctrl_c_during_cleanup_keeps_the_partial_report(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    proc = subprocess.Popen(
        [*CLI, "run", "--env", "tests._slow_close_env:make", "--model", "random",
         "--episodes", "100000", "--json", str(out), "--no-progress"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        _wait_for(proc, "env: reset 4", seen)  # three episodes are over
        proc.send_signal(signal.SIGINT)
        _wait_for(proc, "env: closing", seen)  # the cleanup has started, and hangs
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # Died of SIGINT, as an interrupted program should (a shell shows status 130).
    assert proc.returncode == -signal.SIGINT, "".join(seen) + rest
    assert "interrupted again: not waiting for cleanup; partial report written to" in rest
    report = json.loads(out.read_text())
    (route,) = report["routes"]
    assert route["status"] == "cancelled" and len(route["episodes"]) >= 3
