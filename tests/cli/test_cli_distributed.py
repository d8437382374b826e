"""``rlmesh-trio run --backend processes|ray``: the same report as a local run, options checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .._cli import run_cli

POLICY = "rlmesh_trio.inprocess._demo_policy:cartpole_policy"


def _episodes(path: Path) -> list[tuple[str, int, int, float]]:
    report = json.loads(path.read_text())
    return [
        (route["route_id"], ep["seed"], ep["steps"], ep["reward"])
        for route in report["routes"]
        for ep in route["episodes"]
    ]


@pytest.mark.slow
def test_a_processes_run_writes_the_report_a_local_run_writes(tmp_path: Path) -> None:
    args = ["run", "--env", "CartPole-v1", "--env", "CartPole-v1", "--model", POLICY]
    args += ["--seeds", "0:6", "--no-progress"]
    local = run_cli(*args, "--json", str(tmp_path / "local.json"))
    sharded = run_cli(
        *args, "--backend", "processes", "--shards", "2", "--json", str(tmp_path / "sharded.json")
    )
    assert local.returncode == 0, local.stderr
    assert sharded.returncode == 0, sharded.stderr
    assert _episodes(tmp_path / "sharded.json") == _episodes(tmp_path / "local.json")
    assert "total" in sharded.stdout


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--ray-address", "auto"], "--ray-address goes with --backend ray"),
        (["--shards", "2"], "--shards goes with --backend ray or processes"),
        (["--backend", "processes", "--tls"], "do not travel to shards"),
    ],
)
def test_backend_option_mistakes_are_one_line_and_exit_2(extra: list[str], words: str) -> None:
    result = run_cli("run", "--env", "CartPole-v1", "--model", POLICY, "--seeds", "0:2", *extra)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert words in result.stderr
    assert "Traceback" not in result.stderr


def test_ray_backend_without_the_extra_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # import ray then fails, as without the extra
        "from rlmesh_trio.cli import main\n"
        "sys.argv = ['rlmesh-trio', 'run', '--env', 'CartPole-v1', '--model', "
        f"'{POLICY}', '--seeds', '0:2', '--backend', 'ray']\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert 'pip install "rlmesh-trio[ray]"' in result.stderr
