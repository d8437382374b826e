"""The dashboard's parts without a browser: bounded state, the ledger follower, the token gate,
best effort inside a run, and the CLI's one-line errors."""

from __future__ import annotations

import logging
import sys
import urllib.error
import urllib.request
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import rlmesh_trio as rt
from rlmesh_trio.dashboard import DashboardState, LedgerFollower
from rlmesh_trio.dashboard._hook import check_address
from rlmesh_trio.dashboard._hub import live_statistics
from rlmesh_trio.dashboard._state import HISTORY_POINTS, REWARD_SAMPLE
from rlmesh_trio.hooks import Dashboard

from .._cli import CLI, run_cli

needs_extra = pytest.mark.skipif(
    find_spec("hypercorn") is None or find_spec("starlette") is None,
    reason="needs the dashboard extra",
)


class Ticks:
    """A clock that moves only when told to (state tests need no real time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_state_memory_stays_bounded_over_a_long_run() -> None:
    clock = Ticks()
    state = DashboardState(clock=clock)
    state.plan([("a", None), ("b", None)])
    for i in range(4 * REWARD_SAMPLE):
        clock.now = i * 0.5  # 10,000 s of episodes
        state.episode("ab"[i % 2], float(i % 7), 10)
    rewards, seen = state.rewards()
    assert len(rewards) == REWARD_SAMPLE and seen == 4 * REWARD_SAMPLE
    snap = state.snapshot()
    assert len(snap["throughput"]["t"]) <= HISTORY_POINTS
    assert sum(snap["throughput"]["stepsPerS"]) > 0
    assert [r["done"] for r in snap["routes"]] == [2 * REWARD_SAMPLE] * 2
    assert snap["progress"]["planned"] is None


def test_progress_eta_and_statuses() -> None:
    clock = Ticks()
    state = DashboardState(clock=clock)
    state.plan([("a", 4), ("b", 4)])
    state.started("a")
    clock.now = 10.0
    state.episode("a", 1.0, 5)
    state.retrying("b", "retry 1 of 2 after: ConnectError")
    snap = state.snapshot()
    rows = {r["route"]: r for r in snap["routes"]}
    assert rows["a"]["status"] == "running" and rows["a"]["done"] == 1
    assert rows["b"]["status"] == "retrying" and "ConnectError" in rows["b"]["error"]
    assert snap["progress"]["done"] == 1 and snap["progress"]["planned"] == 8
    assert snap["progress"]["eta"] == pytest.approx(70.0)
    state.ended_route("b", "failed", "gone")
    assert state.snapshot()["progress"]["planned"] == 4  # b will run no more


def test_live_statistics_bootstraps_a_bounded_sample() -> None:
    stats = live_statistics([float(i % 10) for i in range(3000)], 3000)
    assert stats["n"] == 3000 and stats["mean"] == pytest.approx(4.5)
    low, high = stats["meanCi"]
    assert low < 4.5 < high
    assert sum(stats["histogram"]["counts"]) == 3000
    assert live_statistics([], 0) == {"n": 0, "seen": 0}


def _ledger(path: Path) -> rt.RunReport:
    routes = [
        rt.Route(env=gymnasium.make("CartPole-v1"), model=rt.RANDOM, seeds=range(3), route_id="a"),
        rt.Route(env="127.0.0.1:9", model=rt.RANDOM, seeds=range(3, 5), route_id="b"),
    ]
    orchestrator = rt.Orchestrator(
        routes, on_failure="isolate", ledger=path, ledger_route_ends=True
    )
    import trio

    return trio.run(orchestrator.run)


def test_follower_reads_a_growing_ledger_and_waits_out_a_torn_line(tmp_path: Path) -> None:
    written = tmp_path / "whole.jsonl"
    _ledger(written)
    data = written.read_bytes()
    lines = data.split(b"\n")[:-1]
    assert any(b'"type":"route"' in line for line in lines)
    growing = tmp_path / "growing.jsonl"
    state = DashboardState()
    follower = LedgerFollower(growing, state)
    assert follower.poll() == 0  # not there yet
    growing.write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][:7])  # a torn third line
    assert follower.poll() == 2
    snap = state.snapshot()
    episodes_so_far = sum(b'"type":"episode"' in line for line in lines[1:2])
    assert {r["route"] for r in snap["routes"]} == {"a", "b"}
    assert snap["progress"]["done"] == episodes_so_far
    with growing.open("ab") as handle:
        handle.write(lines[2][7:] + b"\n" + b"\n".join(lines[3:]) + b"\n")
    follower.poll()
    rows = {r["route"]: r for r in state.snapshot()["routes"]}
    assert rows["a"]["done"] == 3 and rows["a"]["status"] == "completed"
    assert rows["b"]["status"] == "failed" and "ConnectError" in rows["b"]["error"]
    assert follower.run_over


def test_binding_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(rt.InvalidSpec, match="needs a token"):
        check_address("0.0.0.0:0", None)
    assert check_address("0.0.0.0:8080", "s3cret") == ("0.0.0.0", 8080)
    assert check_address(None, None) == ("127.0.0.1", 0)
    with pytest.raises(rt.InvalidSpec, match="port"):
        check_address("127.0.0.1:http", None)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@needs_extra
def test_a_token_guards_every_page() -> None:
    with Dashboard(token="s3cret") as dash:
        assert dash.url is not None
        assert _get(dash.url + "snapshot")[0] == 401
        assert _get(dash.url + "snapshot", {"Authorization": "Bearer nope"})[0] == 401
        assert _get(dash.url + "snapshot", {"Authorization": "Bearer s3cret"})[0] == 200
        status, page = _get(dash.url)
        assert status == 401 and b"needs its token" in page
        cookie = "rlmesh_trio_dashboard=s3cret"
        assert _get(dash.url + "events", {"Cookie": "rlmesh_trio_dashboard=s3cre"})[0] == 401
        status, page = _get(dash.url + "snapshot", {"Cookie": cookie})
        assert status == 200 and b'"routes"' in page


@needs_extra
async def test_a_failing_dashboard_never_fails_a_route(caplog: pytest.LogCaptureFixture) -> None:
    dash = Dashboard()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("dashboard bug")

    dash.state.episode = broken  # type: ignore[method-assign]
    dash.state.started = broken  # type: ignore[method-assign]
    route = rt.Route(env=gymnasium.make("CartPole-v1"), model=rt.RANDOM, seeds=range(3))
    with caplog.at_level(logging.WARNING, logger="rlmesh_trio.dashboard"):
        report = await rt.run_routes([route], hooks=dash)
    assert report.ok and report.total_episodes == 3
    assert len([r for r in caplog.records if "dashboard bug" in r.getMessage()]) == 1
    dash.close()


def test_cli_refuses_a_public_dashboard_without_a_token() -> None:
    result = run_cli("demo", "--routes", "1", "--episodes", "1", "--dashboard", "0.0.0.0:0")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "needs a token" in result.stderr


def test_cli_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    import subprocess

    # The extra is installed here: hide hypercorn from this one child to see the message.
    code = (
        "import sys; sys.modules['hypercorn'] = None; "
        "from rlmesh_trio.cli import main; "
        "sys.argv = ['rlmesh-trio', 'watch', sys.argv[1]]; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "l.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "error: " in result.stderr and "pip install 'rlmesh-trio[dashboard]'" in result.stderr


@needs_extra
def test_demo_with_a_dashboard_prints_its_url_and_ends() -> None:
    result = run_cli("demo", "--routes", "1", "--episodes", "1", "--no-progress", "--dashboard")
    assert result.returncode == 0, result.stderr
    assert "dashboard: http://127.0.0.1:" in result.stderr
    assert CLI  # the CLI helper is the real console entry point


@needs_extra
async def test_a_retrying_route_shows_as_retrying_then_failed() -> None:
    dash = Dashboard()
    seen: list[str] = []

    class Look(rt.RuntimeHooks):
        async def log(self, event: Any) -> None:  # right after the dashboard saw the notice
            if event.source == "retry":
                rows = dash.state.snapshot()["routes"]
                seen.extend(r["status"] for r in rows)

    route = rt.Route(env="127.0.0.1:9", model=rt.RANDOM, seeds=range(2), route_id="r")
    report = await rt.run_routes(
        [route],
        hooks=rt.HookChain([dash, Look()]),
        on_failure="isolate",
        retries=1,
        retry_backoff=0.0,
    )
    dash.close()
    assert report.routes[0].status == "failed"
    assert seen == ["retrying"]
    row = dash.state.snapshot()["routes"][0]
    assert row["status"] == "failed" and "connect" in row["error"]
