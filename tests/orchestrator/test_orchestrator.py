"""The orchestrator: many routes, one nursery, sibling cancellation, bounded closes."""

from __future__ import annotations

import os
import signal
import threading

import pytest
import trio
import trio.testing

import rlmesh_trio as rt
from rlmesh_trio import Limits, Orchestrator, Route, RunInterrupted, run_routes, shard
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel


def _route(i: int, episodes: int = 3, **kw: object) -> Route:
    env = kw.pop("env", None) or ScriptedEnv(episode_lengths=4)
    model = kw.pop("model", None) or ScriptedModel()
    return Route(env=env, model=model, episodes=episodes, route_id=f"r{i}", **kw)  # type: ignore[arg-type]


async def test_three_routes_complete() -> None:
    report = await run_routes([_route(i) for i in range(3)])
    assert [o.status for o in report.routes] == ["completed"] * 3
    assert report.total_episodes == 9
    assert report.total_steps == 36
    assert report.ok


async def test_one_failure_cancels_siblings_and_keeps_episodes(
    autojump_clock: trio.abc.Clock,
) -> None:
    slow = {"step": 1.0}
    envs = [ScriptedEnv(episode_lengths=2, delays=slow) for _ in range(3)]
    failing = ScriptedEnv(episode_lengths=2, delays=slow, fail_at={"step": 5})
    routes = [
        Route(
            env=envs[0], model=ScriptedModel(), episodes=100, route_id="a", close_env_on_end=True
        ),
        Route(env=failing, model=ScriptedModel(), episodes=100, route_id="bad"),
        Route(
            env=envs[1], model=ScriptedModel(), episodes=100, route_id="c", close_env_on_end=True
        ),
    ]
    with pytest.raises(rt.RunFailed) as caught:
        await run_routes(routes)
    failure = caught.value
    assert failure.route_id == "bad"
    assert isinstance(failure.__cause__, rt.EnvRpcError)
    report = failure.report
    statuses = {o.route_id: o.status for o in report.routes}
    assert statuses == {"a": "cancelled", "bad": "failed", "c": "cancelled"}
    for rid in ("a", "c"):
        outcome = report.outcome(rid)
        assert isinstance(outcome.error, rt.RouteCancelled)
        assert "bad" in outcome.error.reason and "failed" in outcome.error.reason
        # Episodes finished before the failure are kept.
        assert outcome.total_episodes >= 2
    assert report.outcome("bad").total_episodes == 2
    # close_env_on_end routes still closed their env under the shielded scope.
    assert envs[0].closes and envs[1].closes


async def test_isolate_keeps_running(autojump_clock: trio.abc.Clock) -> None:
    failing = ScriptedEnv(episode_lengths=2, fail_at={"step": 3})
    routes = [
        _route(0),
        Route(env=failing, model=ScriptedModel(), episodes=3, route_id="bad"),
        _route(2),
    ]
    report = await run_routes(routes, on_failure="isolate")
    assert [o.status for o in report.routes] == ["completed", "failed", "completed"]
    assert report.outcome("bad").total_episodes == 1
    assert not report.ok


async def test_release_that_never_returns_is_bounded(autojump_clock: trio.abc.Clock) -> None:
    limits = Limits(service_close_timeout=2.0)
    route = Route(
        env=ScriptedEnv(episode_lengths=2),
        model=ScriptedModel(release_hangs=True),
        episodes=2,
        route_id="r",
        limits=limits,
    )
    start = trio.current_time()
    report = await run_routes([route])
    assert report.ok
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.5)


async def test_concurrency_cap_respected() -> None:
    running = 0
    peak = 0

    class Hooks(rt.RuntimeHooks):
        async def session_started(self, event: object) -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)

        async def session_ended(self, event: object) -> None:
            nonlocal running
            running -= 1

    envs = [ScriptedEnv(episode_lengths=3, delays={"step": 0.001}) for _ in range(6)]
    routes = [
        Route(env=e, model=ScriptedModel(), episodes=2, route_id=f"r{i}")
        for i, e in enumerate(envs)
    ]
    report = await run_routes(routes, hooks=Hooks(), max_concurrency=2)
    assert report.ok
    assert peak == 2


async def test_queued_routes_never_start_after_failure(autojump_clock: trio.abc.Clock) -> None:
    failing = ScriptedEnv(episode_lengths=2, fail_at={"reset": 1})
    queued = ScriptedEnv(episode_lengths=2)
    routes = [
        Route(env=failing, model=ScriptedModel(), episodes=1, route_id="bad"),
        Route(env=queued, model=ScriptedModel(), episodes=1, route_id="queued"),
    ]
    with pytest.raises(rt.RunFailed) as caught:
        await run_routes(routes, max_concurrency=1)
    outcome = caught.value.report.outcome("queued")
    assert outcome.status == "cancelled"
    assert outcome.total_steps == 0
    assert queued.resets == []


async def test_caller_cancel(autojump_clock: trio.abc.Clock) -> None:
    env = ScriptedEnv(episode_lengths=5, delays={"step": 1.0})
    orchestrator = Orchestrator(
        [Route(env=env, model=ScriptedModel(), episodes=50, route_id="r", close_env_on_end=True)]
    )
    with trio.move_on_after(12):
        await orchestrator.run()
    outcome = orchestrator.report().outcome("r")
    assert outcome.status == "cancelled"
    assert isinstance(outcome.error, rt.RouteCancelled)
    assert outcome.error.reason == "cancelled by caller"
    assert outcome.total_episodes >= 1
    assert env.closes


async def test_keyboard_interrupt_mid_run() -> None:
    env = ScriptedEnv(episode_lengths=5, delays={"step": 0.01})
    routes = [
        Route(env=env, model=ScriptedModel(), episodes=10_000, route_id="r", close_env_on_end=True)
    ]

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(RunInterrupted) as caught:
            await run_routes(routes)
    finally:
        timer.cancel()
    outcome = caught.value.report.outcome("r")
    assert outcome.status == "cancelled"
    assert "interrupted" in str(outcome.error)
    assert env.closes


def test_shard_deals_seeds_round_robin() -> None:
    routes = shard(envs=["a:1", "b:2", "c:3"], model="m:1", seeds=range(8))
    assert [r.seeds for r in routes] == [(0, 3, 6), (1, 4, 7), (2, 5)]
    assert [r.route_id for r in routes] == ["route-0", "route-1", "route-2"]
    again = shard(envs=["a:1", "b:2", "c:3"], model="m:1", seeds=range(8))
    assert [r.seeds for r in again] == [r.seeds for r in routes]
    by_count = shard(envs=["a:1", "b:2", "c:3"], model="m:1", episodes=7)
    assert [r.episodes for r in by_count] == [3, 2, 2]


def test_route_validation_messages() -> None:
    with pytest.raises(rt.InvalidSpec, match="episodes=3 does not match len\\(seeds\\)=2"):
        Route(env="a:1", model="m:1", seeds=[1, 2], episodes=3)
    with pytest.raises(rt.InvalidSpec, match="execution_horizon"):
        Route(env="a:1", model="m:1", execution_horizon=0)


async def test_no_task_outlives_run_routes() -> None:
    before = len(trio.lowlevel.current_root_task().child_nurseries)
    await run_routes([_route(i) for i in range(4)])
    tasks = [t for n in trio.lowlevel.current_root_task().child_nurseries for t in n.child_tasks]
    assert len(trio.lowlevel.current_root_task().child_nurseries) == before
    assert all("run_routes" not in t.name and "_run_route" not in t.name for t in tasks)


async def test_hooks_see_every_route() -> None:
    hooks = RecordingHooks()
    await run_routes([_route(i, episodes=1) for i in range(3)], hooks=hooks)
    started = {e.route.route_id for name, e in hooks.events if name == "session_started"}
    assert started == {"r0", "r1", "r2"}


def test_run_from_sync_code() -> None:
    report = rt.run([_route(0, episodes=2)])
    assert report.total_episodes == 2
    data = report.to_dict()
    assert data["routes"][0]["status"] == "completed"


async def test_route_passes_max_episode_seconds_to_the_driver(
    autojump_clock: trio.abc.Clock,
) -> None:
    env = ScriptedEnv(episode_lengths=1000, delays={"step": 1.0})
    route = Route(env=env, model=ScriptedModel(), episodes=2, route_id="r", max_episode_seconds=2.5)
    report = await run_routes([route])
    assert [ep.steps for ep in report.episodes] == [3, 3]
    assert all(ep.truncated for ep in report.episodes)
    with pytest.raises(rt.InvalidSpec, match="max_episode_seconds must be a positive number"):
        Route(env=env, model=ScriptedModel(), max_episode_seconds=-1)
