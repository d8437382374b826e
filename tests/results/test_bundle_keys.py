"""Our ``rlmesh.result.v1`` bundle against rlmesh 0.1.0's Recorder, key by key.

rlmesh's own document classes (``rlmesh.recorder.ResultSet``, ``WorkloadRecord``,
``EpisodeRecord``, ``MediaRef``, its public API) are filled with the facts of our
report and serialised by rlmesh; our bundle must be the same document: the same keys
in the same order at every level, the same values, and the same files in the zip.
(tests/results/test_results_bundle.py also films one run through both recorders.)
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.report._bundle import route_config
from rlmesh_trio.results import Recording, bundle_document
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

from .._results_envs import PixelEnv

recorder = pytest.importorskip("rlmesh.recorder")
pytestmark = pytest.mark.interop


def push_right(obs: Any) -> int:
    return 1


def _differences(ours: Any, theirs: Any, path: str = "$") -> list[str]:
    """Every place the two documents differ: a key (or its order), a type or a value."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [f"{path}: not an object"]
        if list(ours) != list(theirs):
            return [f"{path}: keys {list(ours)} != rlmesh's {list(theirs)}"]
        return [d for k in theirs for d in _differences(ours[k], theirs[k], f"{path}.{k}")]
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return [f"{path}: list length differs"]
        return [
            d
            for i, (o, t) in enumerate(zip(ours, theirs, strict=True))
            for d in _differences(o, t, f"{path}[{i}]")
        ]
    same = type(ours) is type(theirs) and ours == theirs
    return [] if same else [f"{path}: {ours!r} != rlmesh's {theirs!r}"]


def _rlmesh_document(report: rt.RunReport, media: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """The document rlmesh's Recorder classes make of the same run."""
    workloads = []
    for ordinal, outcome in enumerate(report.routes):
        episodes = []
        for position, ep in enumerate(outcome.episodes):
            refs = tuple(
                recorder.MediaRef(
                    camera=ref.camera,
                    kind="video",
                    # rlmesh's layout: media/w{ordinal:03d}-{model}/{task}/ep{index:05d}/...
                    path=f"media/w{ordinal:03d}-{outcome.model}/{outcome.route_id}/"
                    f"ep{position:05d}/{ref.camera}.mp4",
                    format="mp4",
                    frame_count=ref.frame_count,
                    width=ref.width,
                    height=ref.height,
                    fps=ref.fps,
                )
                for ref in media.get((outcome.route_id, ep.index), ())
            )
            episodes.append(
                recorder.EpisodeRecord(
                    index=position,
                    seed=ep.seed,
                    steps=ep.steps,
                    reward=ep.reward,
                    terminated=ep.terminated,
                    truncated=ep.truncated,
                    success=ep.success,
                    duration_s=ep.duration_s,
                    media=refs,
                )
            )
        workloads.append(
            recorder.WorkloadRecord(
                model=outcome.model,
                env=outcome.env,
                task=outcome.route_id,
                config=route_config(outcome),
                episodes=episodes,
            )
        )
    result_set = recorder.ResultSet(result_set_id=ours["resultSetId"], workloads=workloads)
    document: dict[str, Any] = result_set.to_dict(recorded_at=ours["recordedAt"])
    return document


def test_our_bundle_is_rlmeshs_document_key_by_key(tmp_path: Path) -> None:
    with Recording(first=2) as recording:
        routes = recording.apply(
            [
                rt.Route(env=PixelEnv(), model=push_right, seeds=[5, 6, 7], route_id="pixels"),
                rt.Route(env=gym.make("CartPole-v1"), model=rt.RANDOM, seeds=[1, 2], route_id="cp"),
                rt.Route(
                    env=ScriptedEnv(episode_lengths=2, fail_at={"step": 5}),
                    model=ScriptedModel(), episodes=4, route_id="flaky",
                ),
            ]
        )  # fmt: skip
        report = rt.run(routes, on_failure="isolate")
        bundle = report.export_bundle(tmp_path / "ours.zip", recording.media)
        with zipfile.ZipFile(bundle) as archive:
            ours = json.loads(archive.read("result.json"))
            names = archive.namelist()
        theirs = _rlmesh_document(report, recording.media, ours)
    assert ours["schema"] == recorder.SCHEMA
    assert _differences(ours, theirs) == []
    again = bundle_document(
        report, recording.media, result_set_id=ours["resultSetId"], recorded_at=ours["recordedAt"]
    )
    assert again == ours
    # rlmesh writes result.json first, then every referenced asset at its path.
    paths = [
        m["path"] for w in theirs["workloads"] for e in w["episodes"] for m in e.get("media", ())
    ]
    assert len(paths) == 2 and names == ["result.json", *paths]
