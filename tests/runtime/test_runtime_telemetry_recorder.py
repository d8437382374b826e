"""Per-step telemetry recorders, and the skip-ahead reservoir behind every series."""

from __future__ import annotations

import random

from rlmesh_trio.runtime._telemetry import RouteTelemetry, Series


def test_a_recorder_feeds_the_same_series_as_add_operation() -> None:
    telemetry = RouteTelemetry(1.0, 0.0, windows=False)
    recorder = telemetry.recorder("env.step", "env")
    assert telemetry.recorder("env.step", "env") is recorder
    recorder.operation(2.0, {"endpoint.user": 1.0, "rpc.total": 99.0})
    telemetry.add_operation("env.step", "env", 4.0, {"endpoint.user": 3.0})
    rows = {(r.op, r.metric): r for r in telemetry.summary()}
    assert rows[("env.step", "rpc.total")].count == 2
    assert rows[("env.step", "rpc.total")].avg == 3.0  # the reply's own rpc.total is ignored
    assert rows[("env.step", "endpoint.user")].avg == 2.0


def test_a_kept_recorder_writes_into_each_new_window() -> None:
    telemetry = RouteTelemetry(1.0, 0.0)
    recorder = telemetry.recorder("runner.round", "runner")
    recorder.add("rpc.total", 1.0)
    first = telemetry.take_window(1.0)
    recorder.add("rpc.total", 5.0)
    recorder.add("rpc.total", 7.0)
    second = telemetry.take_window(2.0)
    assert first is not None and second is not None
    assert [(r.count, r.avg) for r in first[3]] == [(1, 1.0)]
    assert [(r.count, r.avg) for r in second[3]] == [(2, 6.0)]
    assert [r.count for r in telemetry.summary()] == [3]


def test_small_reservoirs_keep_every_position_equally_often() -> None:
    # Skip-ahead sampling (algorithm L) keeps each of n values with probability cap/n,
    # down to a reservoir of one.
    n, runs = 20, 6000
    for cap in (1, 3):
        kept = [0] * n
        for seed in range(runs):
            series = Series(cap=cap, rng=random.Random(seed))
            for value in range(n):
                series.add(float(value))
            assert len(series.samples) == cap and series.count == n
            for value in series.samples:
                kept[int(value)] += 1
        expected = runs * cap / n
        assert all(0.8 * expected < k < 1.2 * expected for k in kept), (cap, kept)


def test_a_long_run_keeps_a_bounded_exact_series() -> None:
    series = Series(cap=16, rng=random.Random(1))
    for value in range(200_000):
        series.add(1.0 if value % 2 else 3.0)
    assert len(series.samples) == 16 and series.count == 200_000
    assert series.total == 400_000.0
    assert set(series.samples) <= {1.0, 3.0}


def test_folding_in_chunks_keeps_what_one_at_a_time_keeps() -> None:
    # Samples wait in `pending` until a fold; however they are chunked, a series with the
    # same seed ends with the same count, sum (added left to right) and reservoir.
    values = [random.Random(9).random() * 100.0 for _ in range(5000)]
    one_at_a_time = Series(cap=32, rng=random.Random(4))
    chunked = Series(cap=32, rng=random.Random(4))
    for i, value in enumerate(values):
        one_at_a_time.add(value)
        one_at_a_time.fold()
        chunked.pending.append(value)
        if i % 97 == 0:
            chunked.fold()
    assert chunked.count == one_at_a_time.count == 5000
    assert chunked.total == one_at_a_time.total
    assert chunked.samples == one_at_a_time.samples


def test_a_route_fold_takes_every_pending_sample_in() -> None:
    from rlmesh_trio.runtime._telemetry import FOLD_STEPS

    telemetry = RouteTelemetry(1.0, 0.0)
    add = telemetry.recorder("env.step", "env")
    for _ in range(300):
        add.add("rpc.total", 1.0)
    telemetry.steps_to_fold = 1
    telemetry.fold()
    assert telemetry.steps_to_fold == FOLD_STEPS
    for table in (telemetry.totals, telemetry.current):
        (series,) = table.values()
        assert not series.pending
        assert series.count == 300
