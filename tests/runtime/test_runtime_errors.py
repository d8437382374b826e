"""Every route error kind, timeouts under MockClock, cancellation and the shutdown after failure."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rlmesh_trio import (
    EnvRpcError,
    HookError,
    InvalidSpec,
    Limits,
    ModelRouteMismatch,
    ModelRpcError,
    OperationTimeout,
    ProtocolError,
    RouteCancelled,
    RouteDriver,
    RouteSpec,
)
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel

HINT = "If the source is 'transport error: connection closed'"


def make_driver(
    env: ScriptedEnv,
    model: ScriptedModel,
    hooks: RecordingHooks | None = None,
    cancel_reason: Any = None,
    **kwargs: Any,
) -> RouteDriver:
    kwargs.setdefault("route_id", "r0")
    kwargs.setdefault("session_id", "sess")
    kwargs.setdefault("env_id", "env-1")
    return RouteDriver(RouteSpec(**kwargs), env, model, hooks, cancel_reason=cancel_reason)


def assert_failed_once(hooks: RecordingHooks, error: BaseException) -> None:
    failed = hooks.of("session_failed")
    assert len(failed) == 1 and failed[0].reason == str(error) and failed[0].error is error
    assert hooks.of("session_ended") == []
    assert hooks.names()[-1] == "session_failed"


@pytest.mark.parametrize(
    ("env_delays", "model_delays", "operation", "component", "timeout"),
    [
        ({"connect": 61}, {}, "env.connect", "env", 60.0),
        ({}, {"connect": 601}, "model.connect", "model", 600.0),
        ({"configure": 700}, {}, "env.configure", "env", 600.0),
        ({}, {"resolve": 700}, "model.resolve_adapter", "model", 600.0),
        ({"reset": 301}, {}, "env.reset", "env", 300.0),
    ],
)
async def test_setup_timeouts(
    autojump_clock: trio.testing.MockClock,
    env_delays: dict[str, float],
    model_delays: dict[str, float],
    operation: str,
    component: str,
    timeout: float,
) -> None:
    hooks = RecordingHooks()
    driver = make_driver(
        ScriptedEnv(delays=env_delays), ScriptedModel(delays=model_delays), hooks, max_episodes=1
    )
    started = trio.current_time()
    with pytest.raises(OperationTimeout) as info:
        await driver.run()
    error = info.value
    assert (error.route_id, error.component_id, error.operation, error.step, error.timeout) == (
        "r0",
        component,
        operation,
        0,
        timeout,
    )
    assert str(error) == (
        f"{operation} timed out on route r0 component {component} at runtime step 0 "
        f"after {timeout:g}s"
    )
    assert trio.current_time() - started == pytest.approx(timeout, abs=0.01)
    assert driver.error is error
    assert_failed_once(hooks, error)


async def test_step_timeout_reports_the_step_the_action_would_produce(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env = ScriptedEnv(episode_lengths=10, fail_at={"step": 3}, failure="hang")
    model = ScriptedModel()
    hooks = RecordingHooks()
    driver = make_driver(
        env,
        model,
        hooks,
        max_episodes=1,
        limits=Limits(env_step_timeout=2.5),
        close_env_on_end=True,
    )
    with pytest.raises(OperationTimeout) as info:
        await driver.run()
    assert str(info.value) == (
        "env.step timed out on route r0 component env at runtime step 3 after 2.5s"
    )
    assert (info.value.operation, info.value.step, info.value.timeout) == ("env.step", 3, 2.5)
    assert driver.step == 2
    # Shutdown after failure: release with the error text, env closed (close_env_on_end).
    assert [r.reason for r, _ in model.releases] == [str(info.value)]
    assert env.closes == [5.0]
    assert_failed_once(hooks, info.value)


async def test_predict_timeout(autojump_clock: trio.testing.MockClock) -> None:
    model = ScriptedModel(fail_at={"predict": 2}, failure="hang")
    driver = make_driver(
        ScriptedEnv(), model, max_episodes=1, limits=Limits(model_predict_timeout=0.2)
    )
    with pytest.raises(OperationTimeout) as info:
        await driver.run()
    assert str(info.value) == (
        "model.predict timed out on route r0 component model at runtime step 1 after 200ms"
    )


async def test_env_rpc_error_carries_operation_step_and_hint() -> None:
    env, model, hooks = (
        ScriptedEnv(episode_lengths=10, fail_at={"step": 2}),
        ScriptedModel(),
        RecordingHooks(),
    )
    driver = make_driver(env, model, hooks, max_episodes=1)
    with pytest.raises(EnvRpcError) as info:
        await driver.run()
    error = info.value
    assert (error.operation, error.step, error.recoverable, error.code) == (
        "env.step",
        2,
        False,
        10,
    )
    # Issue 12 item 23: the closed-connection hint is for a closed connection only.
    assert str(error) == (
        "environment env.step failed at runtime step 2: environment error: [Internal] "
        "injected failure at step call 2"
    )
    assert HINT not in str(error)
    assert isinstance(error.__cause__, EnvRpcError)  # the endpoint's own error is kept
    assert env.closes == []  # close_env_on_end is off: the env endpoint is left alone
    assert_failed_once(hooks, error)


async def test_reset_failure_and_arbitrary_endpoint_exceptions() -> None:
    class BrokenEnv(ScriptedEnv):
        async def reset(self, request: Any) -> Any:
            raise ConnectionResetError("peer went away")

    with pytest.raises(EnvRpcError) as info:
        await make_driver(BrokenEnv(), ScriptedModel(), max_episodes=1).run()
    assert (info.value.operation, info.value.step) == ("env.reset", 0)
    assert info.value.message == "ConnectionResetError: peer went away"


async def test_model_rpc_error_names_the_route_component() -> None:
    hooks = RecordingHooks()
    driver = make_driver(
        ScriptedEnv(), ScriptedModel(fail_at={"predict": 3}), hooks, model_component_id="policy"
    )
    with pytest.raises(ModelRpcError) as info:
        await driver.run()
    assert info.value.component_id == "policy"
    assert str(info.value) == (
        "model endpoint policy request failed: model error: injected failure at predict call 3"
    )
    assert driver.step == 2
    assert_failed_once(hooks, info.value)


async def test_mismatched_context_fails_the_route() -> None:
    model = ScriptedModel(wrong_context_at=2)
    driver = make_driver(ScriptedEnv(), model)
    with pytest.raises(ModelRouteMismatch) as info:
        await driver.run()
    request_id = model.predicts[1].context.request_id
    assert (info.value.component_id, info.value.request_id) == ("model", request_id)
    assert str(info.value) == (
        f"model endpoint model returned mismatched route identity for request {request_id}"
    )


async def test_empty_actions_is_a_protocol_error() -> None:
    driver = make_driver(ScriptedEnv(), ScriptedModel(empty_actions_at=1))
    with pytest.raises(ProtocolError) as info:
        await driver.run()
    assert str(info.value) == (
        "protocol error: model endpoint model returned a predict response with no actions"
    )
    assert driver.step == 0


@pytest.mark.parametrize("name", ["transform_observation", "transform_action"])
async def test_a_failing_transform_is_fatal(name: str) -> None:
    hooks = RecordingHooks(fail_transform=name, fail_transform_at=3)
    driver = make_driver(ScriptedEnv(episode_lengths=10), ScriptedModel(), hooks)
    with pytest.raises(HookError) as info:
        await driver.run()
    assert str(info.value) == (
        f"runtime hook failed: {name} failed: HookFailure: injected {name} failure"
    )
    assert driver.step == 2
    assert_failed_once(hooks, info.value)


async def test_invalid_spec_is_raised_before_anything_is_sent() -> None:
    env, model, hooks = ScriptedEnv(), ScriptedModel(), RecordingHooks()
    driver = make_driver(env, model, hooks, max_episodes=0)
    with pytest.raises(InvalidSpec, match="max_episodes must be >= 1"):
        await driver.run()
    assert env.calls == [] and model.calls == [] and hooks.events == []
    assert isinstance(driver.error, InvalidSpec)


async def test_cancellation_records_route_cancelled_and_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env = ScriptedEnv(episode_lengths=3, delays={"step": 1.0})
    model, hooks = ScriptedModel(), RecordingHooks()
    driver = make_driver(env, model, hooks, max_episodes=10)
    with trio.move_on_after(7.5) as scope:
        await driver.run()
        pytest.fail("run() returned while being cancelled")
    assert scope.cancelled_caught  # trio.Cancelled propagated out of run()
    error = driver.error
    assert isinstance(error, RouteCancelled)
    assert (error.route_id, error.step, error.reason) == ("r0", 7, "cancelled by caller")
    assert str(error) == "route r0 cancelled at runtime step 7: cancelled by caller"
    assert [r.reason for r, _ in model.releases] == [str(error)]
    assert_failed_once(hooks, error)
    # Finished episodes are kept after the failure.
    assert driver.report().total_episodes == 2 and driver.report().total_steps == 7


async def test_cancel_reason_callback_names_the_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    driver = make_driver(
        ScriptedEnv(delays={"step": 1.0}),
        ScriptedModel(),
        cancel_reason=lambda: "cancelled after sibling route r9 failure",
    )
    with trio.move_on_after(2.5):
        await driver.run()
    assert str(driver.error) == (
        "route r0 cancelled at runtime step 2: cancelled after sibling route r9 failure"
    )


async def test_lanes_cancelled_from_outside(autojump_clock: trio.testing.MockClock) -> None:
    env = ScriptedEnv(num_envs=3, episode_lengths=4, delays={"step": 1.0})
    driver = make_driver(env, ScriptedModel(), max_episodes=30)
    with trio.move_on_after(2.5) as scope:
        await driver.run()
    assert scope.cancelled_caught
    assert isinstance(driver.error, RouteCancelled) and driver.error.step == 6


async def test_cleanup_is_bounded_while_cancelled(autojump_clock: trio.testing.MockClock) -> None:
    # A model whose release never returns: shutdown still ends after service_close_timeout.
    env = ScriptedEnv(delays={"step": 1.0, "close": 1000.0})
    model, hooks = ScriptedModel(release_hangs=True), RecordingHooks()
    driver = make_driver(
        env,
        model,
        hooks,
        close_env_on_end=True,
        limits=Limits(service_close_timeout=3.0),
    )
    with trio.move_on_after(2.5) as scope:
        await driver.run()
    assert scope.cancelled_caught
    # Cancelled at t=2.5; cleanup shielded and bounded by 3 s; release and close ran at once.
    assert trio.current_time() == pytest.approx(5.5, abs=0.01)
    assert len(model.releases) == 1 and env.closes == [3.0]
    assert any("did not finish within 3.0s" in e.message for e in hooks.of("log"))
    assert_failed_once(hooks, driver.error)  # type: ignore[arg-type]


async def test_cleanup_failures_are_logged_not_raised() -> None:
    env = ScriptedEnv(fail_at={"step": 1, "close": 1})
    model, hooks = ScriptedModel(fail_at={"release": 1}), RecordingHooks()
    driver = make_driver(env, model, hooks, close_env_on_end=True)
    with pytest.raises(EnvRpcError):
        await driver.run()
    messages = [e.message for e in hooks.of("log")]
    assert any(m.startswith("model route release failed during route shutdown") for m in messages)
    assert any(m.startswith("environment close failed during route shutdown") for m in messages)
    assert_failed_once(hooks, driver.error)  # type: ignore[arg-type]


async def test_normal_end_cleanup_failure_does_not_fail_the_route() -> None:
    model, hooks = ScriptedModel(fail_at={"release": 1, "reset": 1}), RecordingHooks()
    report = await make_driver(ScriptedEnv(episode_lengths=2), model, hooks, max_episodes=2).run()
    assert report.total_episodes == 2
    assert hooks.of("session_failed") == [] and len(hooks.of("session_ended")) == 1
    messages = [e.message for e in hooks.of("log")]
    assert any("reset_adapter failed (ignored)" in m for m in messages)
    assert any("model route release failed" in m for m in messages)


async def test_failure_before_resolve_does_not_release() -> None:
    env, model, hooks = ScriptedEnv(fail_at={"connect": 1}), ScriptedModel(), RecordingHooks()
    with pytest.raises(EnvRpcError) as info:
        await make_driver(env, model, hooks, close_env_on_end=True).run()
    assert info.value.operation == "env.connect"
    assert model.releases == [] and env.closes == []
    assert_failed_once(hooks, info.value)


async def test_cancelled_during_setup_releases_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env, model, hooks = ScriptedEnv(), ScriptedModel(delays={"connect": 100.0}), RecordingHooks()
    driver = make_driver(env, model, hooks, close_env_on_end=True)
    with trio.move_on_after(10) as scope:
        await driver.run()
    assert scope.cancelled_caught
    assert isinstance(driver.error, RouteCancelled) and driver.error.step == 0
    assert model.releases == [] and env.closes == [] and env.configured is None
    assert_failed_once(hooks, driver.error)


async def test_cancelled_while_a_lane_fails_reports_the_lane_error() -> None:
    env = ScriptedEnv(num_envs=3, episode_lengths=5, fail_at={"step": 4})
    driver = make_driver(env, ScriptedModel())
    with pytest.raises(EnvRpcError) as info:
        await driver.run()
    # Sibling lanes were cancelled; the route error is the lane's, unwrapped (no group).
    assert info.value.operation == "env.step" and driver.error is info.value
