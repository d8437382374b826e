"""Telemetry reservoirs (algorithm R); totals-only telemetry when no hook takes windows."""

from __future__ import annotations

import random
import statistics

import pytest

from rlmesh_trio import Limits, RouteDriver, RouteSpec, RuntimeHooks
from rlmesh_trio.hooks.events import TelemetryWindowEvent
from rlmesh_trio.runtime._telemetry import RouteTelemetry, Series
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


class WindowHooks(RuntimeHooks):
    def __init__(self) -> None:
        self.windows: list[TelemetryWindowEvent] = []

    async def telemetry_window(self, event: TelemetryWindowEvent) -> None:
        self.windows.append(event)


def test_reservoir_fills_in_order_then_stays_bounded() -> None:
    series = Series(cap=8, rng=random.Random(3))
    for value in range(8):
        series.add(float(value))
    assert series.samples == [float(v) for v in range(8)]
    for value in range(8, 5000):
        series.add(float(value))
    assert len(series.samples) == 8
    assert series.count == 5000 and series.total == sum(range(5000))
    assert all(0.0 <= v < 5000 for v in series.samples)


def test_reservoir_is_a_uniform_sample() -> None:
    # Each of n values is kept with probability cap/n: the mean kept value is unbiased
    # and late values are kept as often as early ones.
    n, cap, runs = 4000, 40, 300
    means, late = [], 0
    for seed in range(runs):
        series = Series(cap=cap, rng=random.Random(seed))
        for value in range(n):
            series.add(float(value))
        means.append(statistics.fmean(series.samples))
        late += sum(1 for v in series.samples if v >= n / 2)
    assert statistics.fmean(means) == pytest.approx((n - 1) / 2, rel=0.03)
    assert late / (runs * cap) == pytest.approx(0.5, abs=0.03)


def test_totals_only_telemetry_still_reports_window_spans() -> None:
    telemetry = RouteTelemetry(1.0, 0.0, windows=False)
    telemetry.add_operation("env.step", "env", 2.0, {"request.bytes": 10.0, "rpc.total": 9.0})
    telemetry.add("runner.round", "runner", "rpc.total", 3.0)
    telemetry.window_steps += 1
    assert telemetry.take_window(1.5) == (0.0, 1.5, 1, ())
    rows = {(r.op, r.metric): r for r in telemetry.summary()}
    assert rows[("env.step", "rpc.total")].avg == 2.0  # the reply's own rpc.total is ignored
    assert rows[("env.step", "request.bytes")].unit == "bytes"
    assert rows[("runner.round", "rpc.total")].count == 1


def test_windowed_telemetry_starts_fresh_series_each_window() -> None:
    telemetry = RouteTelemetry(1.0, 0.0)
    telemetry.add("env.step", "env", "rpc.total", 1.0)
    first = telemetry.take_window(1.0)
    telemetry.add("env.step", "env", "rpc.total", 5.0)
    second = telemetry.take_window(2.0)
    assert first is not None and second is not None
    assert [r.avg for r in first[3]] == [1.0]
    assert [r.avg for r in second[3]] == [5.0]
    assert [r.count for r in telemetry.summary()] == [2]


async def test_driver_without_window_hooks_keeps_the_same_summary() -> None:
    def run_spec() -> RouteSpec:
        return RouteSpec(route_id="r0", session_id="s", max_episodes=3, limits=Limits())

    plain = await RouteDriver(run_spec(), ScriptedEnv(episode_lengths=4), ScriptedModel()).run()
    hooks = WindowHooks()
    hooked = await RouteDriver(
        run_spec(), ScriptedEnv(episode_lengths=4), ScriptedModel(), hooks
    ).run()
    assert hooks.windows and hooks.windows[-1].rows
    keys = [(r.op, r.component, r.metric, r.count) for r in plain.telemetry]
    assert keys == [(r.op, r.component, r.metric, r.count) for r in hooked.telemetry]
