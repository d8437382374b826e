"""The per-task operation watchdog: exact deadlines without a cancel scope per operation."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rlmesh_trio import Limits, OperationTimeout, RouteDriver, RouteSpec
from rlmesh_trio.runtime._watchdog import OperationWatchdog, current_watchdog
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel


class Expired(Exception):
    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.op = op


async def timed(watchdog: OperationWatchdog[str], name: str, timeout: float, takes: float) -> None:
    watchdog.arm(trio.current_time() + timeout, name)
    try:
        await trio.sleep(takes)
    finally:
        watchdog.disarm()


async def test_ops_that_finish_in_time_never_fire(autojump_clock: trio.testing.MockClock) -> None:
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    async with watchdog.guard(Expired):
        for i in range(50):
            await timed(watchdog, f"op{i}", timeout=1.0, takes=0.9)
            await trio.sleep(5.0)  # time between operations is never counted
    assert watchdog.expired is None


@pytest.mark.parametrize("first_timeout", [0.5, 100.0])
async def test_a_late_op_fires_exactly_at_its_own_deadline(
    autojump_clock: trio.testing.MockClock, first_timeout: float
) -> None:
    # The alarm was last set for an op with a later (100 s: moved forward) or an
    # earlier (0.5 s: re-armed on waking) deadline; either way the late op fires on time.
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    with pytest.raises(Expired) as info:
        async with watchdog.guard(Expired):
            await timed(watchdog, "first", timeout=first_timeout, takes=0.1)
            started = trio.current_time()
            await timed(watchdog, "late", timeout=2.0, takes=30.0)
    assert info.value.op == "late"
    assert trio.current_time() - started == pytest.approx(2.0, abs=1e-6)


async def test_alternating_timeouts_keep_exact_timing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    with pytest.raises(Expired) as info:
        async with watchdog.guard(Expired):
            for _ in range(20):
                await timed(watchdog, "step", timeout=30.0, takes=0.01)
                await timed(watchdog, "predict", timeout=10.0, takes=0.01)
            started = trio.current_time()
            await timed(watchdog, "step", timeout=30.0, takes=0.01)
            await timed(watchdog, "predict", timeout=10.0, takes=11.0)
    assert info.value.op == "predict"
    assert trio.current_time() - started == pytest.approx(10.01, abs=1e-6)


async def test_body_errors_come_out_bare_with_their_cause() -> None:
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    cause = KeyError("inner")
    with pytest.raises(ValueError, match="boom") as info:
        async with watchdog.guard(Expired):
            raise ValueError("boom") from cause
    assert info.value.__cause__ is cause
    assert watchdog.expired is None


async def test_outer_cancellation_passes_through(autojump_clock: trio.testing.MockClock) -> None:
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    with trio.move_on_after(1.0) as outer:
        async with watchdog.guard(Expired):
            await timed(watchdog, "op", timeout=5.0, takes=10.0)
    assert outer.cancelled_caught
    assert watchdog.expired is None


async def test_only_the_guarded_task_sees_its_watchdog() -> None:
    seen: list[Any] = []
    assert current_watchdog() is None
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    async with watchdog.guard(Expired):
        seen.append(current_watchdog())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _record(seen))
    assert seen == [watchdog, None]
    assert current_watchdog() is None


async def _record(seen: list[Any]) -> None:
    seen.append(current_watchdog())


# ---- through the driver ------------------------------------------------------


class SlowStepHook(RecordingHooks):
    """A step_completed hook that takes longer than any operation timeout."""

    async def step_completed(self, event: Any) -> None:
        await super().step_completed(event)
        await trio.sleep(10.0)


async def test_hook_time_between_operations_is_not_an_operation_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = Limits(env_step_timeout=1.0, model_predict_timeout=1.0)
    driver = RouteDriver(
        RouteSpec(route_id="r0", session_id="s", env_id="env-1", max_episodes=2, limits=limits),
        ScriptedEnv(episode_lengths=3),
        ScriptedModel(),
        SlowStepHook(),
    )
    report = await driver.run()
    assert (report.total_episodes, report.total_steps) == (2, 6)


async def test_lane_timeouts_name_the_lane_operation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The other lanes finish the budget in zero (mock) time; then only the hung one is left.
    env = ScriptedEnv(num_envs=3, episode_lengths=5, fail_at={"step": 7}, failure="hang")
    hooks = RecordingHooks()
    driver = RouteDriver(
        RouteSpec(
            route_id="r0",
            session_id="s",
            env_id="env-1",
            max_episodes=6,
            limits=Limits(env_step_timeout=1.5),
        ),
        env,
        ScriptedModel(),
        hooks,
    )
    started = trio.current_time()
    with pytest.raises(OperationTimeout) as info:
        await driver.run()
    assert (info.value.operation, info.value.timeout) == ("env.step", 1.5)
    assert trio.current_time() - started == pytest.approx(1.5, abs=0.01)
    assert [e.reason for e in hooks.of("session_failed")] == [str(info.value)]
