"""The HTML report's plots in a real browser: no axis label or legend drawn outside its plot,
no toolbar over a title (the page's self-test measures the laid-out boxes)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.results import write_html

from .._browser import CHROMIUM, selftest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)"),
]


def test_no_label_is_clipped_and_no_toolbar_covers_a_title(tmp_path: Path) -> None:
    envs = [gym.make("CartPole-v1"), gym.make("CartPole-v1")]
    report = rt.run(rt.shard(envs=envs, model=rt.RANDOM, seeds=range(6)))
    page = write_html(report, tmp_path / "report.html")
    result = selftest(page)
    assert result["errors"] == [] and result["plots"] == result["plotsRendered"] >= 4
    assert result["layout"] == {"clipped": [], "overlaps": []}
