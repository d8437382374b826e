"""Every example runs as a user would run it (a script in a subprocess), so none of them rots.

Each runs with small arguments from the repo root; the examples themselves
must not depend on the working directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    # Examples import rlmesh_trio as an installed package would be; the repo root stands in.
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env.pop("COLUMNS", None)
    result = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return result


def test_parallel_rollouts_eight_routes() -> None:
    result = _run(
        [
            str(EXAMPLES / "parallel_rollouts.py"),
            "--routes",
            "8",
            "--episodes",
            "8",
            "--max-steps",
            "30",
        ]
    )
    lines = result.stdout.splitlines()
    for i in range(8):
        assert any(line.startswith(f"route-{i}: completed, 1 episodes, 30 steps") for line in lines)
    assert re.search(
        r"^total: 8 routes, 8 episodes, 240 steps, mean reward 30\.0", result.stdout, re.M
    )


def test_custom_hooks_log_transform_and_count() -> None:
    result = _run(
        [str(EXAMPLES / "custom_hooks.py"), "--episodes", "2", "--flip", "0.3", "--max-steps", "60"]
    )
    out, err = result.stdout, result.stderr
    # LoggingHooks: one start, two episodes and one end per route, on stderr via logging.
    for route in ("clean", "noisy"):
        assert f"[{route}] session started" in err
        assert len(re.findall(rf"\[{route}\] episode \S+ done", err)) == 2
        assert f"[{route}] session ended: completed requested episodes" in err
    # StepCounter: progress lines; the clean route holds the pole to the 60-step cap.
    clean = re.search(
        r"^clean: 2 episodes, mean reward 60\.0, 120 steps counted, 0 actions "
        r"flipped$",
        out,
        re.M,
    )
    assert clean, out
    noisy = re.search(
        r"^noisy: 2 episodes, mean reward [\d.]+, (\d+) steps counted, (\d+) actions "
        r"flipped$",
        out,
        re.M,
    )
    assert noisy, out
    assert int(noisy.group(2)) > 0  # the transform hook did change actions on its route only


@pytest.mark.slow  # a whole pytest session in a subprocess: 3-9 s
def test_trio_test_harness_passes() -> None:
    result = _run(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "trio_test_harness")]
    )
    assert re.search(r"^8 passed\b", result.stdout, re.M), result.stdout


@pytest.mark.interop
def test_drive_rlmesh_servers() -> None:
    pytest.importorskip("rlmesh", reason="needs the interop extra (rlmesh 0.1.0)")
    result = _run(
        [
            str(EXAMPLES / "drive_rlmesh_servers.py"),
            "--envs",
            "2",
            "--episodes",
            "4",
            "--max-steps",
            "40",
        ]
    )
    out = result.stdout
    assert re.search(
        r"^rlmesh servers up: model unix://\S+, envs tcp://127\.0\.0\.1:\d+, "
        r"tcp://127\.0\.0\.1:\d+$",
        out,
        re.M,
    ), out
    assert "route-0: completed, 2 episodes, 80 steps, seeds [0, 2], rewards [40.0, 40.0]" in out
    assert "route-1: completed, 2 episodes, 80 steps, seeds [1, 3], rewards [40.0, 40.0]" in out
    assert re.search(r"^total: 2 routes, 4 episodes, 160 steps, mean reward 40\.0", out, re.M)
    assert re.search(r"^  model\.predict +p50 .* \(160 calls\)$", out, re.M), out
