"""Telemetry: per-operation samples, windows under MockClock, summary rows, merging."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from rlmesh_trio import Limits, RouteDriver, RouteSpec, TelemetryRow
from rlmesh_trio.runtime import merge_telemetry
from rlmesh_trio.runtime._telemetry import Series, metric_unit, percentile
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel


def row(rows: tuple[TelemetryRow, ...] | list[TelemetryRow], op: str, metric: str) -> TelemetryRow:
    (found,) = [r for r in rows if r.op == op and r.metric == metric]
    return found


def test_nearest_rank_percentiles() -> None:
    ordered = [float(v) for v in range(1, 11)]
    assert percentile(ordered, 0.50) == 6.0  # index ceil(9 * 0.5) = 5
    assert percentile(ordered, 0.95) == 10.0
    assert percentile(ordered, 0.0) == 1.0
    assert percentile([], 0.5) == 0.0
    assert percentile([3.0], 0.99) == 3.0


def test_series_memory_is_bounded_and_totals_exact() -> None:
    series = Series(cap=64)
    for value in range(10_000):
        series.add(float(value))
    assert len(series.samples) == 64 and series.count == 10_000
    summary = series.row("env.step", "env", "rpc.total")
    assert summary.avg == pytest.approx(4999.5) and summary.count == 10_000
    assert summary.unit == "ms"
    assert summary.p50 <= summary.p95 <= summary.p99


def test_metric_units() -> None:
    assert metric_unit("rpc.total") == "ms"
    assert metric_unit("endpoint.user") == "ms"
    assert metric_unit("request.bytes") == "bytes"
    assert metric_unit("predict.in_flight") == "count"


async def test_windows_follow_the_mock_clock(autojump_clock: trio.testing.MockClock) -> None:
    hooks = RecordingHooks()
    env = ScriptedEnv(episode_lengths=5, delays={"step": 0.25, "reset": 0.1})
    model = ScriptedModel(delays={"predict": 0.05})
    spec = RouteSpec(
        route_id="r0", session_id="s", max_episodes=4, limits=Limits(telemetry_window=1.0)
    )
    report = await RouteDriver(spec, env, model, hooks).run()
    windows = hooks.of("telemetry_window")
    # 20 steps of 0.3 s + 4 resets of 0.1 s = 6.4 s. A window closes at the first step
    # after its deadline (so lasts 1.0..1.3 s): five full windows plus the final flush.
    assert len(windows) == 6
    assert sum(w.steps for w in windows) == report.total_steps == 20
    for w in windows[:-1]:
        assert w.window_end - w.window_start >= 1.0
    for earlier, later in itertools.pairwise(windows):
        assert later.window_start == earlier.window_end
    step_row = row(windows[0].rows, "env.step", "rpc.total")
    assert step_row.avg == pytest.approx(250.0) and step_row.component == "env"
    summary = hooks.of("telemetry_summary")[0]
    assert (summary.total_steps, summary.total_episodes) == (20, 4)
    assert summary.rows == report.telemetry
    assert row(report.telemetry, "env.step", "rpc.total").count == 20
    assert row(report.telemetry, "env.reset", "rpc.total").avg == pytest.approx(100.0)
    assert row(report.telemetry, "model.predict", "rpc.total").p99 == pytest.approx(50.0)
    # runner.round: the whole predict -> step iteration.
    assert row(report.telemetry, "runner.round", "rpc.total").avg == pytest.approx(300.0)


async def test_endpoint_telemetry_from_replies_is_recorded() -> None:
    env = ScriptedEnv(
        episode_lengths=2,
        telemetry={"endpoint.total": 0.5, "endpoint.user": 0.25, "response.bytes": 40.0},
    )
    model = ScriptedModel(telemetry={"endpoint.total": 1.5, "request.bytes": 24.0})
    report = await RouteDriver(
        RouteSpec(route_id="r0", session_id="s", max_episodes=1), env, model
    ).run()
    assert row(report.telemetry, "env.step", "endpoint.total").avg == 0.5
    assert row(report.telemetry, "env.reset", "endpoint.user").unit == "ms"
    assert row(report.telemetry, "env.step", "response.bytes").unit == "bytes"
    predict_bytes = row(report.telemetry, "model.predict", "request.bytes")
    assert (predict_bytes.unit, predict_bytes.count, predict_bytes.avg) == ("bytes", 2, 24.0)


async def test_merge_telemetry_pools_routes(autojump_clock: trio.testing.MockClock) -> None:
    reports = []
    for delay in (0.1, 0.3):
        env = ScriptedEnv(episode_lengths=2, delays={"step": delay})
        reports.append(
            await RouteDriver(
                RouteSpec(route_id=f"r{delay}", session_id="s", max_episodes=2),
                env,
                ScriptedModel(),
            ).run()
        )
    merged = merge_telemetry(reports)
    steps = row(merged, "env.step", "rpc.total")
    assert steps.count == 8 and steps.avg == pytest.approx(200.0)
    assert steps.p50 == pytest.approx(300.0) and steps.p95 == pytest.approx(300.0)
    assert merge_telemetry([]) == []


async def test_transforms_are_timed_when_present() -> None:
    report = await RouteDriver(
        RouteSpec(route_id="r0", session_id="s", max_episodes=1),
        ScriptedEnv(episode_lengths=3),
        ScriptedModel(),
        RecordingHooks(),
    ).run()
    assert row(report.telemetry, "runner.transform_observation", "rpc.total").count == 3
    assert row(report.telemetry, "runner.transform_action", "rpc.total").count == 3
    plain = await RouteDriver(
        RouteSpec(route_id="r1", session_id="s", max_episodes=1),
        ScriptedEnv(episode_lengths=3),
        ScriptedModel(),
    ).run()
    assert not [r for r in plain.telemetry if r.op.startswith("runner.transform")]
