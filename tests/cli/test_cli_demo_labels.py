"""The demo's routes are labelled by env id and policy name, not by a loopback address:port
(which changes every run), in the JSON report, the bundle and its media paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._cli import run_cli


def _demo(tmp_path: Path, *extra: str) -> tuple[dict, dict]:  # type: ignore[type-arg]
    out, bundle = tmp_path / "demo.json", tmp_path / "bundle"
    result = run_cli(
        "demo", "--routes", "2", "--episodes", "1", "--json", str(out),
        "--bundle", str(bundle), "--no-progress", *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not re.search(r"127\.0\.0\.1", result.stdout)
    return json.loads(out.read_text()), json.loads((bundle / "result.json").read_text())


def test_demo_routes_are_labelled_by_env_and_policy(tmp_path: Path) -> None:
    report, bundle = _demo(tmp_path)
    assert [(r["env"], r["model"]) for r in report["routes"]] == [
        ("CartPole-v1", "cartpole_policy"),
        ("CartPole-v1", "cartpole_policy"),
    ]
    keys = [(w["model"], w["env"], w["task"]) for w in bundle["workloads"]]
    assert keys == [
        ("cartpole_policy", "CartPole-v1", "cartpole-0"),
        ("cartpole_policy", "CartPole-v1", "cartpole-1"),
    ]


@pytest.mark.slow
def test_demo_media_paths_carry_the_policy_name(tmp_path: Path) -> None:
    _, bundle = _demo(tmp_path, "--record", "1")
    paths = [m["path"] for w in bundle["workloads"] for e in w["episodes"] for m in e["media"]]
    assert paths == [
        "media/w000-cartpole_policy/cartpole-0/ep00000/render.mp4",
        "media/w001-cartpole_policy/cartpole-1/ep00000/render.mp4",
    ]
