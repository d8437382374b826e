"""Per-operation timing samples, telemetry windows and the summary.

Samples are kept per ``(op, component, metric)`` in a bounded reservoir
(Vitter's algorithm R), so memory stays flat on long runs; counts and
averages are exact, percentiles are nearest-rank over the reservoir
(index ``ceil((len - 1) * p)``).

A route adds some twenty samples per step, so the add path is kept short:
each ``(op, component, metric)``'s add function is looked up once and
cached, and window series are only kept when someone takes the windows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping

from ._results import RouteReport, SeriesSnapshot, TelemetryRow

__all__ = [
    "RESERVOIR_SIZE",
    "OperationRecorder",
    "RouteTelemetry",
    "Series",
    "merge_telemetry",
    "metric_unit",
    "percentile",
]

RESERVOIR_SIZE = 2048
#: A skip no run reaches (keeps a vanishing keep-probability finite).
_NEVER = 2**62

_COUNT_METRICS = frozenset({"held.episodes", "predict.in_flight", "group.size"})


def metric_unit(metric: str) -> str:
    """``bytes`` for ``*.bytes``, ``count`` for counters, else ``ms``."""
    if metric.endswith(".bytes"):
        return "bytes"
    if metric in _COUNT_METRICS:
        return "count"
    return "ms"


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list (0.0 when empty)."""
    if not ordered:
        return 0.0
    return ordered[math.ceil((len(ordered) - 1) * p)]


class Series:
    """Count, sum and a bounded reservoir of one metric's samples.

    Once the reservoir is full, which sample is kept next is drawn ahead
    (Li's algorithm L: the same uniform sample as algorithm R, each of the n
    values seen kept with probability cap/n), so an add that keeps nothing --
    almost all of them on a long run -- costs two additions and a compare.
    """

    __slots__ = ("_keep_at", "_weight", "cap", "count", "random", "samples", "total")

    def __init__(self, cap: int = RESERVOIR_SIZE, rng: random.Random | None = None) -> None:
        self.cap = cap
        self.count = 0
        self.total = 0.0
        self.samples: list[float] = []
        self.random = (rng or random).random
        self._weight = 1.0
        #: The count at which the next value replaces a reservoir sample.
        self._keep_at = cap + 1

    def add(self, value: float) -> None:
        count = self.count = self.count + 1
        self.total += value
        # The reservoir holds min(count, cap) samples: it is full once count exceeds cap.
        if count <= self.cap:
            self.samples.append(value)
            if count == self.cap:
                self._draw_next()
        elif count == self._keep_at:
            self.samples[int(self.random() * self.cap)] = value
            self._draw_next()

    def _draw_next(self) -> None:
        """Draw the next kept position: skip a geometric run of values (algorithm L)."""
        rand = self.random
        # 1 - random() lies in (0, 1]: its log is finite.
        self._weight *= math.exp(math.log(1.0 - rand()) / self.cap)
        miss = math.log1p(-self._weight) if self._weight < 1.0 else -math.inf
        run = math.log(1.0 - rand()) / miss if miss < 0.0 else 0.0
        self._keep_at = self.count + (int(run) if run < _NEVER else _NEVER) + 1

    def row(self, op: str, component: str, metric: str) -> TelemetryRow:
        ordered = sorted(self.samples)
        return TelemetryRow(
            op=op,
            component=component,
            metric=metric,
            unit=metric_unit(metric),
            count=self.count,
            avg=self.total / self.count if self.count else 0.0,
            p50=percentile(ordered, 0.50),
            p95=percentile(ordered, 0.95),
            p99=percentile(ordered, 0.99),
        )


_Key = tuple[str, str, str]


def _rows(series: Mapping[_Key, Series]) -> tuple[TelemetryRow, ...]:
    return tuple(s.row(*key) for key, s in series.items() if s.count)


class OperationRecorder:
    """Where one ``(op, component)``'s samples go: for a call site that records every step.

    It keeps each metric's add function, so a sample costs one dict lookup
    and the add; :meth:`RouteTelemetry.take_window` empties those caches when
    fresh window series start.
    """

    __slots__ = ("_adders", "_component", "_op", "_telemetry")

    def __init__(self, telemetry: RouteTelemetry, op: str, component: str) -> None:
        self._telemetry = telemetry
        self._op = op
        self._component = component
        self._adders: dict[str, Callable[[float], None]] = {}

    def forget(self) -> None:
        """Drop the cached add functions (the window series they fed are closed)."""
        self._adders = {}

    def _resolve(self, metric: str) -> Callable[[float], None]:
        adder = self._telemetry.adder(self._op, self._component, metric)
        self._adders[metric] = adder
        return adder

    def add(self, metric: str, value: float) -> None:
        """One sample of ``metric``."""
        (self._adders.get(metric) or self._resolve(metric))(value)

    def operation(self, rpc_ms: float, extra: Mapping[str, float]) -> None:
        """One finished remote operation: its round trip plus whatever the reply measured
        (a reply's own ``rpc.total`` is ignored: the round trip is the caller's)."""
        adders = self._adders
        (adders.get("rpc.total") or self._resolve("rpc.total"))(rpc_ms)
        for metric, value in extra.items():
            if metric != "rpc.total":
                (adders.get(metric) or self._resolve(metric))(float(value))


class RouteTelemetry:
    """The telemetry of one route: totals for the summary, plus the current window.

    Times are in the caller's clock (the driver uses ``trio.current_time()``,
    so windows follow a ``MockClock`` in tests). With ``windows=False`` (nobody
    listens to window events) only the totals are kept: :meth:`take_window`
    still reports each window's span and steps, with no rows.
    """

    def __init__(
        self,
        window: float,
        now: float,
        reservoir: int = RESERVOIR_SIZE,
        *,
        windows: bool = True,
    ) -> None:
        self._reservoir = reservoir
        self._rng = random.Random(0x5EED)
        self._windows = windows
        self.window = window
        self.totals: dict[_Key, Series] = {}
        self.current: dict[_Key, Series] = {}
        self.window_start = now
        self.window_deadline = now + window
        self.window_steps = 0
        # (op, component) -> its recorder, which caches per metric the function a sample
        # goes to: the total series' add, or one feeding the total and the current window.
        # take_window() empties those caches so fresh window series get picked up.
        self._recorders: dict[tuple[str, str], OperationRecorder] = {}

    def _series(self, table: dict[_Key, Series], key: _Key) -> Series:
        series = table.get(key)
        if series is None:
            series = table[key] = Series(self._reservoir, self._rng)
        return series

    def recorder(self, op: str, component: str) -> OperationRecorder:
        """The (cached) recorder of ``(op, component)``: keep it for a per-step call site."""
        found = self._recorders.get((op, component))
        if found is None:
            found = self._recorders[(op, component)] = OperationRecorder(self, op, component)
        return found

    def adder(self, op: str, component: str, metric: str) -> Callable[[float], None]:
        """The function one sample of ``(op, component, metric)`` goes to now (see recorder)."""
        key = (op, component, metric)
        total = self._series(self.totals, key)
        if self._windows:
            window = self._series(self.current, key)

            def both(value: float) -> None:
                total.add(value)
                window.add(value)

            return both
        return total.add

    def add(self, op: str, component: str, metric: str, value: float) -> None:
        self.recorder(op, component).add(metric, value)

    def add_operation(
        self, op: str, component: str, rpc_ms: float, extra: Mapping[str, float]
    ) -> None:
        """One finished remote operation: its round trip plus whatever the reply measured."""
        self.recorder(op, component).operation(rpc_ms, extra)

    def window_due(self, now: float) -> bool:
        return now >= self.window_deadline

    def take_window(self, now: float) -> tuple[float, float, int, tuple[TelemetryRow, ...]] | None:
        """Close the current window: ``(start, end, steps, rows)``, or ``None`` if it is empty."""
        start, steps, current = self.window_start, self.window_steps, self.current
        self.current = {}
        if current:
            for recorder in self._recorders.values():
                recorder.forget()
        self.window_start = now
        self.window_deadline = now + self.window
        self.window_steps = 0
        if not current and not steps:
            return None
        return start, now, steps, _rows(current)

    def summary(self) -> tuple[TelemetryRow, ...]:
        return _rows(self.totals)

    def snapshot(self) -> dict[_Key, SeriesSnapshot]:
        """The totals' raw state, for :attr:`RouteReport.samples`."""
        return {
            key: (s.count, s.total, tuple(s.samples)) for key, s in self.totals.items() if s.count
        }


def _row_from(key: _Key, count: int, total: float, samples: list[float]) -> TelemetryRow:
    op, component, metric = key
    samples.sort()
    return TelemetryRow(
        op=op,
        component=component,
        metric=metric,
        unit=metric_unit(metric),
        count=count,
        avg=total / count if count else 0.0,
        p50=percentile(samples, 0.50),
        p95=percentile(samples, 0.95),
        p99=percentile(samples, 0.99),
    )


def merge_telemetry(reports: Iterable[RouteReport]) -> list[TelemetryRow]:
    """One summary over many routes: exact counts and averages, pooled-sample percentiles.

    Rows keep first-seen order of ``(op, component, metric)``. Reports built
    without ``samples`` contribute their rows' counts and averages only.
    """
    merged: dict[_Key, tuple[int, float, list[float]]] = {}
    for report in reports:
        seen: set[_Key] = set()
        for key, (count, total, samples) in report.samples.items():
            seen.add(key)
            c, t, pool = merged.get(key, (0, 0.0, []))
            pool.extend(samples)
            merged[key] = (c + count, t + total, pool)
        for row in report.telemetry:
            key = (row.op, row.component, row.metric)
            if key in seen:
                continue
            c, t, pool = merged.get(key, (0, 0.0, []))
            merged[key] = (c + row.count, t + row.avg * row.count, pool)
    return [_row_from(key, c, t, pool) for key, (c, t, pool) in merged.items() if c]
