"""The HTML report in a real browser: every plot drew, no script errors, videos play."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.results import Recording, write_html
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

from .._browser import CHROMIUM, screenshot, selftest
from .._results_envs import lean_policy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)"),
]


def _cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=25)


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    with Recording(first=1) as recording:
        routes = recording.apply(
            [
                *rt.shard(envs=[_cartpole(), _cartpole()], model=lean_policy, seeds=range(10)),
                rt.Route(
                    env=ScriptedEnv(episode_lengths=3, fail_at={"step": 7}),
                    model=ScriptedModel(),
                    episodes=5,
                    route_id="flaky",
                ),
            ]
        )
        report = rt.run(routes, on_failure="isolate")
        page = write_html(report, tmp_path / "report.html", recording.media)
    assert [o.status for o in report.routes] == ["completed", "completed", "failed"]
    result = selftest(page)
    assert result["errors"] == []
    # returns, lengths, seeds, latency, throughput, failures: each drew SVG content.
    assert result["plots"] == result["plotsRendered"] == result["panels"] == 6
    videos = result["videos"]
    assert len(videos) == 2  # each CartPole route's first episode; the scripted env has no frames
    assert all(v["error"] is None and v["duration"] > 0 for v in videos)
    shot = screenshot(page, tmp_path / "report.png")
    assert shot.stat().st_size > 10_000
