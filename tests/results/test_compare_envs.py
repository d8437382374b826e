"""``compare`` judges "the same env" by what the env said in its handshake, not by its label.

Issue 34 (2): two runs against two CartPole-v1 servers were "different envs"
because a served env's label is its address (``tcp://127.0.0.1:37209`` vs
``...:39191``); so were a served and an in-process CartPole. Real servers
(``rt.serve_env`` on port 0), real in-process envs, the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import trio

import rlmesh_trio as rt
from rlmesh_trio.results import load_run, run_differences

from .._cli import run_cli

SEEDS = range(4)


async def _served_run(env_id: str, path: Path) -> dict:
    async with rt.serve_env(gym.make(env_id), "127.0.0.1:0") as server:
        report = await rt.run_routes(rt.shard(envs=[server.address], model=rt.RANDOM, seeds=SEEDS))
    path.write_text(report.to_json())
    return json.loads(path.read_text())


async def _in_process_run(env_id: str, path: Path) -> dict:
    report = await rt.run_routes(rt.shard(envs=[gym.make(env_id)], model=rt.RANDOM, seeds=SEEDS))
    path.write_text(report.to_json())
    return json.loads(path.read_text())


async def _warnings(a: Path, b: Path) -> list[str]:
    result = await trio.to_thread.run_sync(run_cli, "compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    assert "B - A = " in result.stdout
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


def _differences(a: Path, b: Path) -> list[str]:
    """What ``compare`` would warn about, in Python (no process to start)."""
    return run_differences(load_run(a), load_run(b))


def _old(data: dict, path: Path) -> Path:
    """``data`` as a report written before routes recorded their env contract."""
    for route in data["routes"]:
        del route["env_contract"]
    path.write_text(json.dumps(data))
    return path


async def test_two_cartpole_servers_are_the_same_env(tmp_path: Path) -> None:
    a = await _served_run("CartPole-v1", tmp_path / "a.json")
    b = await _served_run("CartPole-v1", tmp_path / "b.json")
    # The labels are the two servers' addresses; the contracts are CartPole-v1's.
    assert a["routes"][0]["env"] != b["routes"][0]["env"]
    contract = a["routes"][0]["env_contract"]
    assert contract["env_id"] == "CartPole-v1" and contract == b["routes"][0]["env_contract"]
    assert await _warnings(tmp_path / "a.json", tmp_path / "b.json") == []
    # The same env id with other spaces (another configuration) is named as such.
    other = json.loads(json.dumps(b))
    other["routes"][0]["env_contract"]["spaces"] = "0" * 16
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert _differences(tmp_path / "a.json", tmp_path / "other.json") == [
        "the runs used envs with the same ids but other spaces: "
        f"A CartPole-v1 (spaces {contract['spaces']}), B CartPole-v1 (spaces {'0' * 16})"
    ]
    # Reports from before the contract was recorded still load and compare: an address
    # label says nothing about the env, so no warning either.
    old_a, old_b = _old(a, tmp_path / "old_a.json"), _old(b, tmp_path / "old_b.json")
    assert load_run(old_a).routes[0].env_contract is None
    assert await _warnings(old_a, old_b) == []
    assert _differences(old_a, tmp_path / "b.json") == []


async def test_a_served_and_an_in_process_cartpole_are_the_same_env(tmp_path: Path) -> None:
    served = await _served_run("CartPole-v1", tmp_path / "served.json")
    local = await _in_process_run("CartPole-v1", tmp_path / "local.json")
    assert served["routes"][0]["env_contract"] == local["routes"][0]["env_contract"]
    assert await _warnings(tmp_path / "served.json", tmp_path / "local.json") == []
    # An older in-process report names its env by id: it still matches the served run's.
    old_local = _old(local, tmp_path / "old_local.json")
    assert _differences(tmp_path / "served.json", old_local) == []


async def test_cartpole_and_mountaincar_differ_by_env_id(tmp_path: Path) -> None:
    await _served_run("CartPole-v1", tmp_path / "cartpole.json")
    mountain = await _served_run("MountainCar-v0", tmp_path / "mountain.json")
    local_mountain = await _in_process_run("MountainCar-v0", tmp_path / "local_mountain.json")
    expected = ["warning: the runs used different envs: A CartPole-v1, B MountainCar-v0"]
    assert await _warnings(tmp_path / "cartpole.json", tmp_path / "mountain.json") == expected
    sentence = [expected[0].removeprefix("warning: ")]
    assert _differences(tmp_path / "cartpole.json", tmp_path / "local_mountain.json") == sentence
    # Two older in-process reports: their labels (env ids) still tell them apart.
    old_cartpole = await _in_process_run("CartPole-v1", tmp_path / "local_cartpole.json")
    old = _old(old_cartpole, tmp_path / "old_cartpole.json")
    assert _differences(old, _old(local_mountain, tmp_path / "old_mountain.json")) == sentence
    assert mountain["routes"][0]["env"].startswith(("tcp://", "127.0.0.1"))
