"""``--record`` edges: an env that cannot render is said once, plainly (no -v needed), and
pygame's SDL probing prints nothing that looks like one of our errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .._cli import CLI

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", "--model", "random", "--no-progress", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_an_env_that_cannot_render_is_said_once(tmp_path: Path) -> None:
    result = _run(
        "--env", "tests._render_envs:no_render", "--env", "tests._render_envs:no_render",
        "--episodes", "4", "--record", "2", "--bundle", str(tmp_path / "b"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "warning: --record filmed nothing on route-0, route-1: its env's render() returned "
        "no frame (make it with render_mode='rgb_array'), and its observations are not images"
    ], result.stderr
    assert "bundle written to" in result.stdout and "(0 videos)" in result.stdout


def test_headless_recording_prints_no_sdl_error(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XDG_RUNTIME_DIR", "DISPLAY", "WAYLAND_DISPLAY") and not k.startswith("SDL_")
    }
    result = _run(
        "--env", "CartPole-v1", "--episodes", "1", "--record", "1",
        "--bundle", str(tmp_path / "b"), env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr and "error" not in result.stderr
    assert "(1 video)" in result.stdout
