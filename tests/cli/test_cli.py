"""The CLI, run as a subprocess the way a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .._cli import CLI, help_text, run_cli, run_to_json, serving
from .._episode_marks import FIFO_VARIABLE, open_episode_fifo, wait_for_episode

REPO = Path(__file__).resolve().parents[2]
ROUTE_KEYS = {
    "route_id",
    "env",
    "model",
    "status",
    "error",
    "total_steps",
    "total_episodes",
    "retries",  # issue 15: the report's contract grew
    "wall_s",  # issue 34: with resumed_steps, what a route's steps/s is computed from
    "resumed_steps",
    "env_contract",  # issue 34: what compare judges "the same env" on
    "episodes",
}
EPISODE_KEYS = {
    "index",
    "episode_id",
    "env_index",
    "seed",
    "steps",
    "reward",
    "terminated",
    "truncated",
    "success",
    "duration_s",
    "predict_ms",
    "step_ms",
    "trial",
    "attempts",  # issue 15
}
TOP_KEYS = {
    "schema",  # issue 15: schema name + version, run metadata
    "schema_version",
    "run",
    "routes",
    "total_steps",
    "total_episodes",
    "mean_reward",
    "success_rate",
    "wall_s",
    "steps_per_s",
    "telemetry",
    "statistics",
}
TELEMETRY_KEYS = {"op", "component", "metric", "unit", "count", "avg", "p50", "p95", "p99"}


def check_report_schema(data: dict) -> None:
    assert set(data) == TOP_KEYS
    for route in data["routes"]:
        assert set(route) == ROUTE_KEYS
        assert route["status"] in {"completed", "failed", "cancelled"}
        if route["error"] is not None:
            assert set(route["error"]) == {"type", "message"}
        for episode in route["episodes"]:
            assert set(episode) == EPISODE_KEYS
    for row in data["telemetry"]:
        assert set(row) == TELEMETRY_KEYS


def test_every_command_has_help() -> None:
    for command in ([], ["demo"], ["serve-env"], ["serve-model"], ["run"], ["check"]):
        assert "Usage:" in help_text(*command)


@pytest.mark.slow
def test_demo_small(tmp_path: Path) -> None:
    out = tmp_path / "demo.json"
    result = run_cli(
        "demo", "--routes", "2", "--episodes", "1", "--json", str(out), "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    assert "cartpole-0" in result.stdout and "total" in result.stdout
    data = json.loads(out.read_text())
    check_report_schema(data)
    assert data["total_episodes"] == 2
    assert [r["status"] for r in data["routes"]] == ["completed", "completed"]
    assert [ep["seed"] for r in data["routes"] for ep in r["episodes"]] == [0, 1]
    assert {row["op"] for row in data["telemetry"]} >= {"env.step", "model.predict"}


@pytest.mark.slow
def test_serve_env_serve_model_and_run(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with (
        serving("serve-env", "CartPole-v1") as env_a,
        serving("serve-env", "CartPole-v1", "--lanes", "2") as env_b,
        serving("serve-model", "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY") as model,
    ):
        data = run_to_json(out, "--env", env_a, "--env", env_b, "--model", model, "--seeds", "0:5")
    check_report_schema(data)
    assert data["total_episodes"] == 5
    seeds = sorted(ep["seed"] for r in data["routes"] for ep in r["episodes"])
    assert seeds == [0, 1, 2, 3, 4]
    assert [len(r["episodes"]) for r in data["routes"]] == [3, 2]


def test_run_against_unreachable_address(tmp_path: Path) -> None:
    out = tmp_path / "fail.json"
    result = run_cli(
        "run",
        "--env",
        "127.0.0.1:1",
        "--model",
        "rlmesh_trio.inprocess._demo_policy:cartpole_policy",
        "--episodes",
        "1",
        "--json",
        str(out),
        "--no-progress",
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "127.0.0.1:1" in errors[0]
    assert "Traceback" not in result.stderr
    data = json.loads(out.read_text())
    check_report_schema(data)
    assert data["routes"][0]["status"] == "failed"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["run", "--env", "NoSuchEnv-v0", "--model", "127.0.0.1:1", "--episodes", "1"],
            "NoSuchEnv-v0",
        ),
        (
            ["run", "--env", "127.0.0.1:1", "--model", "no_such_module:fn", "--episodes", "1"],
            "no_such_module",
        ),
        (["run", "--env", "127.0.0.1:1", "--model", "127.0.0.1:2", "--seeds", "x:y"], "x:y"),
        (
            [
                "run",
                "--env",
                "127.0.0.1:1",
                "--model",
                "127.0.0.1:2",
                "--episodes",
                "1",
                "--timeouts",
                '{"bogusMs": 1}',
            ],
            "bogusMs",
        ),
        (["serve-env", "NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (
            [
                "run",
                "--env",
                "CartPole-v1",
                "--model",
                "127.0.0.1:2",
                "--episodes",
                "1",
                "--max-episode-seconds",
                "0",
            ],
            "--max-episode-seconds",
        ),
    ],
)
def test_user_mistakes_are_one_line(args: list[str], needle: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert needle in lines[0]


@pytest.mark.slow
def test_sigint_to_run_exits_130_with_partial_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "partial.json"
    fifo = tmp_path / "episodes.fifo"
    episodes = open_episode_fifo(fifo)
    monkeypatch.setenv(FIFO_VARIABLE, str(fifo))
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # servers import tests.*
    with (
        serving("serve-env", "tests._episode_marks:cartpole_signalling_first_episode") as env,
        serving("serve-model", "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY") as model,
    ):
        proc = subprocess.Popen(
            [
                *CLI,
                "run",
                "--env",
                env,
                "--model",
                model,
                "--episodes",
                "100000",
                "--json",
                str(out),
                "--no-progress",
                "--timeouts",
                '{"serviceCloseTimeoutMs": 2000}',
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The env signals once the runtime has recorded an episode (no clock guess).
        assert wait_for_episode(episodes, 60), "no episode finished"
        os.close(episodes)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert elapsed < 2.0 + 1.0
    data = json.loads(out.read_text())
    check_report_schema(data)
    route = data["routes"][0]
    assert route["status"] == "cancelled"
    assert "interrupted" in route["error"]["message"]
    assert route["total_episodes"] >= 1


@pytest.mark.slow
def test_run_and_check_with_a_bearer_token(tmp_path: Path) -> None:
    token = "cli-secret"
    with (
        serving("serve-env", "CartPole-v1", "--token", token) as env,
        serving(
            "serve-model", "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY", "--token", token
        ) as model,
    ):
        ok = run_cli(
            "run",
            "--env",
            env,
            "--model",
            model,
            "--episodes",
            "1",
            "--token",
            token,
            "--no-progress",
            "--max-episode-steps",
            "20",
            "--batch-predicts",
        )
        refused = run_cli("run", "--env", env, "--model", model, "--episodes", "1", "--no-progress")
        checked = run_cli("check", env, "--token", token)
    assert ok.returncode == 0, ok.stderr
    assert refused.returncode == 1
    assert "UNAUTHENTICATED" in refused.stderr and "Traceback" not in refused.stderr
    assert checked.returncode == 0, checked.stderr
    assert "CartPole-v1" in checked.stdout and "autoreset" in checked.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["loop", "worker", "caller"])
def test_serve_env_thread_modes_serve_the_same_episodes(mode: str, tmp_path: Path) -> None:
    out = tmp_path / f"{mode}.json"
    with serving("serve-env", "CartPole-v1", "--env-thread", mode) as env:
        data = run_to_json(
            out,
            "--env",
            env,
            "--model",
            "rlmesh_trio.inprocess._demo_policy:cartpole_policy",
            "--seeds",
            "3,4",
            "--max-episode-steps",
            "50",
        )
    episodes = data["routes"][0]["episodes"]
    assert [(ep["seed"], ep["steps"]) for ep in episodes] == [(3, 50), (4, 50)]


def test_run_deals_trial_blocks_and_reports_episode_timings(tmp_path: Path) -> None:
    out = tmp_path / "trials.json"
    with (
        serving("serve-env", "CartPole-v1") as first,
        serving("serve-env", "CartPole-v1") as second,
    ):
        data = run_to_json(
            out,
            "--env",
            first,
            "--env",
            second,
            "--model",
            "rlmesh_trio.inprocess._demo_policy:cartpole_policy",
            "--seeds",
            "0:5",
            "--max-episode-steps",
            "10",
            "--trial-index-base",
            "100",
        )
    check_report_schema(data)
    trials = [[ep["trial"] for ep in route["episodes"]] for route in data["routes"]]
    assert trials == [[100, 101, 102], [103, 104]]  # seeds 0,2,4 and 1,3
    for route in data["routes"]:
        for ep in route["episodes"]:
            assert ep["step_ms"] > 0 and ep["predict_ms"] >= 0
