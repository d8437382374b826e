"""report, compare, and --bundle/--html/--record on the CLI, run the way a user runs them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest

import rlmesh_trio as rt

from .._cli import help_text, run_cli
from .._results_envs import first_action, lean_policy


def _run_json(tmp_path: Path, name: str, policy: object, seeds: range) -> Path:
    envs = [gym.make("CartPole-v1") for _ in range(2)]
    report = rt.run(rt.shard(envs=envs, model=policy, seeds=seeds))
    path = tmp_path / name
    path.write_text(report.to_json())
    return path


def test_help_lists_the_results_commands_and_options() -> None:
    assert {"report", "compare"} <= set(help_text().split())
    for command in ("run", "demo"):
        text = help_text(command)
        for option in ("--bundle", "--html", "--record", "--record-seeds"):
            assert option in text
    assert "95% bootstrap CI" in help_text("compare")


def test_compare_two_runs(tmp_path: Path) -> None:
    a = _run_json(tmp_path, "a.json", first_action, range(20))
    b = _run_json(tmp_path, "b.json", lean_policy, range(20))
    result = run_cli("compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("A ") and "20 episodes" in lines[0]
    assert lines[2].startswith("B - A = ") and "95% CI" in lines[2]
    assert lines[3] == "the interval excludes zero: B has the higher mean return"
    assert run_cli("compare", str(a), str(b)).stdout == result.stdout  # seeded
    same = run_cli("compare", str(a), str(a))
    assert "includes zero" in same.stdout


def test_report_writes_bundle_and_html(tmp_path: Path) -> None:
    run = _run_json(tmp_path, "run.json", lean_policy, range(6))
    result = run_cli(
        "report", str(run), "--bundle", str(tmp_path / "b"), "--html", str(tmp_path / "r.html")
    )
    assert result.returncode == 0, result.stderr
    assert "IQM 95% CI" in result.stdout and "all routes" in result.stdout
    doc = json.loads((tmp_path / "b" / "result.json").read_text())
    assert doc["schema"] == "rlmesh.result.v1" and len(doc["workloads"]) == 2
    assert "plotly" in (tmp_path / "r.html").read_text()[:4_000_000]


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    missing = run_cli("report", str(tmp_path / "none.json"), "--html", str(tmp_path / "x.html"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")
    assert "none.json: cannot read" in missing.stderr and len(missing.stderr.splitlines()) == 1
    (tmp_path / "notes.txt").write_text("keep me")
    bad_bundle = run_cli(
        "run", "--env", "CartPole-v1", "--model", "x:y", "--episodes", "1",
        "--bundle", str(tmp_path / "notes.txt"),
    )  # fmt: skip
    assert bad_bundle.returncode == 2 and "is a file" in bad_bundle.stderr
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    bad_seeds = run_cli("demo", "--record-seeds", "a:b")
    assert bad_seeds.returncode == 2 and bad_seeds.stderr.startswith("error: ")
    assert not list(tmp_path.glob("*.html"))


@pytest.mark.slow
def test_demo_records_into_bundle_and_html(tmp_path: Path) -> None:
    bundle, page, out = tmp_path / "demo.zip", tmp_path / "demo.html", tmp_path / "demo.json"
    result = run_cli(
        "demo", "--routes", "2", "--episodes", "1", "--record", "1", "--no-progress",
        "--bundle", str(bundle), "--html", str(page), "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"bundle written to {bundle} (2 videos)" in result.stdout
    with zipfile.ZipFile(bundle) as zf:
        names = sorted(zf.namelist())
        doc = json.loads(zf.read("result.json"))
    assert names[-1] == "result.json" and sum(n.endswith("/render.mp4") for n in names) == 2
    media = [ep["media"][0] for w in doc["workloads"] for ep in w["episodes"]]
    assert all(m["camera"] == "render" and m["frameCount"] == 500 for m in media)
    assert page.read_text().count("data:video/mp4;base64,") == 2
    assert json.loads(out.read_text())["statistics"]["run"]["n"] == 2


def test_run_records_chosen_episodes_of_in_process_envs(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    result = run_cli(
        "run", "--env", "CartPole-v1", "--env", "CartPole-v1",
        "--model", "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY", "--seeds", "0:4",
        "--max-episode-steps", "10", "--record", "1", "--record-seeds", "3",
        "--bundle", str(bundle), "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads((bundle / "result.json").read_text())
    filmed = [
        (w["task"], ep["seed"], ep["media"][0]["frameCount"])
        for w in doc["workloads"]
        for ep in w["episodes"]
        if "media" in ep
    ]
    assert filmed == [("route-0", 0, 10), ("route-1", 1, 10), ("route-1", 3, 10)]
    for workload in doc["workloads"]:
        for ep in workload["episodes"]:
            for media in ep.get("media", ()):
                assert (bundle / media["path"]).stat().st_size > 0
