"""rlmesh.result.v1 bundles: the document, folder and zip forms, and rlmesh's Recorder agreeing."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.results import SCHEMA, Recording, bundle_document

from .._results_envs import lean_policy

SEEDS = [3, 4, 5]
# Differ by construction between two runs: ids, clocks.
VOLATILE = {"resultSetId", "recordedAt", "durationS"}


def _strip(value: Any) -> Any:
    """The document without its ids and times, for a key-by-key comparison."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _cartpole(**kwargs: Any) -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", max_episode_steps=30, **kwargs)


def test_document_has_one_workload_per_route() -> None:
    routes = rt.shard(envs=[_cartpole(), _cartpole()], model=lean_policy, seeds=range(5))
    report = rt.run(routes)
    doc = bundle_document(report)
    assert doc["schema"] == SCHEMA == "rlmesh.result.v1"
    assert [w["task"] for w in doc["workloads"]] == ["route-0", "route-1"]
    first = doc["workloads"][0]
    assert (first["model"], first["env"], first["numEpisodes"]) == ("lean_policy", "CartPole-v1", 3)
    assert first["config"] == {"routeId": "route-0", "status": "completed", "error": None}
    assert [e["seed"] for e in first["episodes"]] == [0, 2, 4]
    assert [e["index"] for e in first["episodes"]] == [0, 1, 2]
    rewards = [e["reward"] for e in first["episodes"]]
    assert first["metrics"] == {
        "meanReward": sum(rewards) / 3,
        "successRate": None,
        "totalSteps": sum(e["steps"] for e in first["episodes"]),
    }
    assert all("media" not in e for e in first["episodes"])


def test_folder_and_zip_bundles_hold_the_same_document(tmp_path: Path) -> None:
    report = rt.run([rt.Route(env=_cartpole(), model=lean_policy, seeds=SEEDS)])
    folder = report.export_bundle(tmp_path / "bundle")
    archive = report.export_bundle(tmp_path / "bundle.zip")
    in_folder = json.loads((folder / "result.json").read_text())
    with zipfile.ZipFile(archive) as zf:
        assert zf.namelist() == ["result.json"]
        in_zip = json.loads(zf.read("result.json"))
    assert _strip(in_folder) == _strip(in_zip)
    report.export_bundle(folder)  # refreshing an existing bundle folder is fine
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(rt.InvalidSpec, match="not a folder"):
        report.export_bundle(tmp_path / "plain.txt")


def test_failed_route_keeps_its_episodes_and_error_kind() -> None:
    from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

    env = ScriptedEnv(episode_lengths=2, fail_at={"step": 5})
    routes = [rt.Route(env=env, model=ScriptedModel(), episodes=4, route_id="flaky")]
    report = rt.run(routes, on_failure="isolate")
    workload = bundle_document(report)["workloads"][0]
    assert workload["config"]["status"] == "failed"
    assert workload["config"]["error"] == type(report.routes[0].error).__name__
    assert workload["numEpisodes"] == 2  # finished episodes are not lost


@pytest.mark.interop
@pytest.mark.slow
def test_same_document_as_rlmesh_recorder(tmp_path: Path) -> None:
    """The same seeded run, filmed, through rlmesh's Recorder and through us: key by key."""
    import rlmesh
    import rlmesh.numpy as rlmesh_numpy
    from rlmesh.recorder import Recorder

    with Recording(first=len(SEEDS)) as recording:
        routes = recording.apply(
            [rt.Route(env=_cartpole(render_mode="rgb_array"), model=lean_policy, seeds=SEEDS)]
        )
        ours = rt.run(routes)
        outcome = ours.routes[0]
        ours.export_bundle(tmp_path / "ours.zip", recording.media)

    from rlmesh_trio.report._bundle import route_config

    recorder = Recorder()
    hooks = recorder.capture(
        model=outcome.model, env=outcome.env, task=outcome.route_id, config=route_config(outcome)
    )
    env = _cartpole(render_mode="rgb_array")
    rlmesh.run(rlmesh_numpy.Model(lean_policy), env, seeds=SEEDS, hooks=hooks)
    recorder.export(tmp_path / "theirs.zip")
    recorder.close()

    def read(name: str) -> tuple[dict[str, Any], list[str]]:
        with zipfile.ZipFile(tmp_path / name) as zf:
            return json.loads(zf.read("result.json")), sorted(zf.namelist())

    (mine, my_files), (theirs, their_files) = read("ours.zip"), read("theirs.zip")
    assert set(mine) == set(theirs)
    assert _strip(mine) == _strip(theirs)
    assert my_files == their_files
    media = mine["workloads"][0]["episodes"][0]["media"][0]
    assert media["path"] == "media/w000-lean_policy/route-0/ep00000/render.mp4"
    assert (media["camera"], media["frameCount"], media["width"]) == ("render", 30, 600)
