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

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # in case a CI forces colours onto rich


def _example(name: str) -> str:
    return str(EXAMPLES / name)


def _run(*args: str) -> str:
    """``python *args`` from the repo root; asserts exit status 0; returns stdout."""
    return _run_both(*args)[0]


def _run_both(*args: str, timeout: float = 60.0) -> tuple[str, str]:
    """``python *args`` from the repo root; asserts exit status 0; returns stdout and stderr."""
    # The examples import rlmesh_trio as an installed package; this checkout stands in for it.
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    result = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )
    return ANSI.sub("", result.stdout), ANSI.sub("", result.stderr)


def _line(pattern: str, text: str) -> re.Match[str]:
    match = re.search(pattern, text, re.M)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return match


def test_parallel_rollouts_over_eight_served_routes() -> None:
    out = _run(_example("parallel_rollouts.py"), *"--routes 8 --episodes 8 --max-steps 30".split())
    for i in range(8):
        address = r"\(127\.0\.0\.1:\d+\)"
        _line(rf"^route-{i}: completed, 1 episodes, 30 steps, mean reward 30\.0 {address}$", out)
    _line(r"^total: 8 routes, 8 episodes, 240 steps, mean reward 30\.0, \d+ steps/s$", out)
    _line(r"^total .* 8/8 episodes +240 steps", out)  # RichProgress's final frame


def test_custom_hooks_log_transform_and_count() -> None:
    out, err = _run_both(
        _example("custom_hooks.py"), *"--episodes 2 --flip 0.3 --max-steps 60".split()
    )
    # LoggingHooks (stderr, via logging): start, two episodes and the end of each route.
    for route in ("clean", "noisy"):
        _line(rf"^INFO \[{route}\] session started", err)
        assert len(re.findall(rf"^INFO \[{route}\] episode \S+ done: ", err, re.M)) == 2, err
        _line(rf"^INFO \[{route}\] session ended: completed requested episodes", err)
    # StepCounter's progress line, and the clean route holding the pole to the 60-step cap.
    _line(r"^progress: clean at 100 steps$", out)
    _line(r"^clean: 2 episodes, mean reward 60\.0, 120 steps counted, 0 actions flipped$", out)
    noisy = _line(r"^noisy: 2 episodes, mean reward [\d.]+, \d+ steps counted, (\d+) actions", out)
    assert int(noisy.group(1)) > 0  # the transform changed actions, on its own route only


@pytest.mark.slow  # a whole pytest session in a subprocess: 3-9 s
def test_trio_test_harness_passes() -> None:
    out = _run(*"-m pytest -q -p no:cacheprovider".split(), _example("trio_test_harness"))
    _line(r"^8 passed\b", out)


@pytest.mark.interop
def test_drive_rlmesh_servers() -> None:
    pytest.importorskip("rlmesh", reason="needs the interop extra (rlmesh 0.1.0)")
    out = _run(_example("drive_rlmesh_servers.py"), *"--envs 2 --episodes 4 --max-steps 40".split())
    tcp = r"tcp://127\.0\.0\.1:\d+"
    _line(rf"^rlmesh servers up: model unix://\S+/model\.sock, envs {tcp}, {tcp}$", out)
    # Seeds dealt round-robin over the two rlmesh env servers, every episode at the cap.
    rewards = r"rewards \[40\.0, 40\.0\]"
    _line(rf"^route-0: completed, 2 episodes, 80 steps, seeds \[0, 2\], {rewards}$", out)
    _line(rf"^route-1: completed, 2 episodes, 80 steps, seeds \[1, 3\], {rewards}$", out)
    _line(r"^total: 2 routes, 4 episodes, 160 steps, mean reward 40\.0", out)
    _line(r"^  model\.predict +p50 +[\d.]+ ms +p95 +[\d.]+ ms +\(160 calls\)$", out)
