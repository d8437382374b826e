"""The ready-made hooks: RichProgress and LoggingHooks, watching several routes."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

import rlmesh_trio as rt
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


def _routes(n: int = 3) -> list[rt.Route]:
    return [
        rt.Route(
            env=ScriptedEnv(episode_lengths=3), model=ScriptedModel(), episodes=2, route_id=f"r{i}"
        )
        for i in range(n)
    ]


async def test_rich_progress_draws_a_bar_per_route_and_a_total() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    routes = _routes()
    with rt.hooks.RichProgress(routes, console=console) as bars:
        report = await rt.run_routes(routes, hooks=bars)
    assert report.ok
    text = out.getvalue()
    for route_id in ("r0", "r1", "r2", "total"):
        assert route_id in text
    assert "6/6" in text  # the total bar: 3 routes x 2 episodes
    assert "done" in text


async def test_rich_progress_starts_and_stops_by_itself() -> None:
    out = io.StringIO()
    routes = _routes(2)
    bars = rt.hooks.RichProgress(routes, console=Console(file=out, force_terminal=True))
    await rt.run_routes(routes, hooks=bars)
    assert not bars._live
    assert "4/4" in out.getvalue()


async def test_logging_hooks_name_each_route(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rlmesh_trio.route")
    await rt.run_routes(_routes(2), hooks=rt.hooks.LoggingHooks())
    lines = [r.getMessage() for r in caplog.records if r.name == "rlmesh_trio.route"]
    for route_id in ("r0", "r1"):
        assert any(line.startswith(f"[{route_id}] session started") for line in lines)
        assert sum(line.startswith(f"[{route_id}] episode ep-") for line in lines) == 2
        assert any(line.startswith(f"[{route_id}] session ended") for line in lines)


async def test_hook_chain_runs_progress_and_logging_together(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rlmesh_trio.route")
    routes = _routes(1)
    bars = rt.hooks.RichProgress(routes, console=Console(file=io.StringIO()))
    chain = rt.HookChain([bars, rt.hooks.LoggingHooks()])
    report = await rt.run_routes(routes, hooks=chain)
    assert report.ok
    assert any("episode ep-000002" in r.getMessage() for r in caplog.records)
