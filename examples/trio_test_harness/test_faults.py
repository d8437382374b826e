"""How a run behaves when things break, with the scripted fakes of ``rlmesh_trio.testing``.

No network and no real env: ``ScriptedEnv`` plays episodes of fixed length and
fails on request; ``ScriptedModel`` answers (slowly, if asked). Timeouts run
on Trio's virtual clock (the ``autojump_clock`` fixture of pytest-trio), so a
ten-minute stall takes no real time.
"""

from __future__ import annotations

import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel


async def test_env_failure_keeps_finished_episodes() -> None:
    # Episodes of 3 steps; the 7th step raises: two episodes are done by then.
    broken = rt.Route(
        ScriptedEnv(episode_lengths=3, fail_at={"step": 7}),
        ScriptedModel(),
        episodes=5,
        route_id="broken",
    )
    healthy = rt.Route(
        ScriptedEnv(episode_lengths=3), ScriptedModel(), episodes=5, route_id="healthy"
    )
    report = await rt.run_routes([broken, healthy], on_failure="isolate")

    failed = report.outcome("broken")
    assert failed.status == "failed"
    assert isinstance(failed.error, rt.EnvRpcError)
    assert [ep.steps for ep in failed.episodes] == [3, 3]
    assert report.outcome("healthy").status == "completed"
    assert report.outcome("healthy").total_episodes == 5


async def test_env_failure_cancels_siblings_by_default() -> None:
    routes = [
        rt.Route(ScriptedEnv(fail_at={"step": 2}), ScriptedModel(), episodes=3, route_id="bad"),
        # The sibling is slow, so it is still running when the failure lands.
        rt.Route(
            ScriptedEnv(delays={"step": 0.05}), ScriptedModel(), episodes=100, route_id="slow"
        ),
    ]
    with pytest.raises(rt.RunFailed) as caught:
        await rt.run_routes(routes)

    report = caught.value.report
    assert report.outcome("bad").status == "failed"
    sibling = report.outcome("slow")
    assert sibling.status == "cancelled"
    assert isinstance(sibling.error, rt.RouteCancelled)
    assert "bad" in str(sibling.error)


async def test_slow_model_hits_the_predict_timeout(autojump_clock: trio.testing.MockClock) -> None:
    hooks = RecordingHooks()
    route = rt.Route(
        ScriptedEnv(),
        ScriptedModel(delays={"predict": 600.0}),  # ten minutes per answer
        episodes=1,
        limits=rt.Limits(model_predict_timeout=30.0),
    )
    start = trio.current_time()
    with pytest.raises(rt.RunFailed) as caught:
        await rt.run_routes([route], hooks=hooks)

    assert isinstance(caught.value.__cause__, rt.OperationTimeout)
    assert trio.current_time() - start == pytest.approx(30.0, abs=1.0)  # virtual seconds
    assert len(hooks.of("session_failed")) == 1


async def test_hung_release_does_not_hang_the_route(autojump_clock: trio.testing.MockClock) -> None:
    # A model whose release never returns: the route still ends, after the close timeout.
    model = ScriptedModel(release_hangs=True)
    route = rt.Route(
        ScriptedEnv(episode_lengths=2),
        model,
        episodes=2,
        limits=rt.Limits(service_close_timeout=5.0),
    )
    report = await rt.run_routes([route])

    assert report.ok and report.total_episodes == 2
    assert len(model.releases) == 1
