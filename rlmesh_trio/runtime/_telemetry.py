"""Per-operation timing samples, telemetry windows and the summary.

Samples are kept per ``(op, component, metric)`` in a bounded reservoir
(Vitter's algorithm R), so memory stays flat on long runs; counts and
averages are exact, percentiles are nearest-rank over the reservoir
(index ``ceil((len - 1) * p)``).

A route adds some twenty samples per step, so the add path is kept short:
each ``(op, component, metric)``'s add function is looked up once and
cached, a sample is only appended to its series' pending list (folded in
every :data:`FOLD_STEPS` steps and whenever it is read), and window series
are only kept when someone takes the windows.
"""

from __future__ import annotations

import math
import operator
import random
from collections.abc import Callable, Iterable, Mapping
from functools import reduce

from ._results import RouteReport, SeriesSnapshot, TelemetryRow

__all__ = [
    "FOLD_STEPS",
    "RESERVOIR_SIZE",
    "OperationRecorder",
    "RouteTelemetry",
    "Series",
    "merge_telemetry",
    "metric_unit",
    "percentile",
]

RESERVOIR_SIZE = 2048
#: Steps between folds of the pending samples (a few kilobytes per series at most).
FOLD_STEPS = 256
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

    A sample is only appended to :attr:`pending` (a hot call site keeps
    ``series.pending.append``: one C call per sample); :meth:`fold` moves
    pending samples into the count, the sum and the reservoir, and reading
    :attr:`count`, :attr:`total` or :attr:`samples` folds first. Once the
    reservoir is full, which sample is kept next is drawn ahead (Li's
    algorithm L: the same uniform sample as algorithm R, each of the n values
    seen kept with probability cap/n), so a fold only touches the kept ones.
    """

    __slots__ = (
        "_count",
        "_keep_at",
        "_ordered",
        "_ordered_at",
        "_samples",
        "_total",
        "_weight",
        "cap",
        "pending",
        "random",
    )

    def __init__(self, cap: int = RESERVOIR_SIZE, rng: random.Random | None = None) -> None:
        self.cap = cap
        self.random = (rng or random).random
        #: Samples added since the last fold, in order.
        self.pending: list[float] = []
        self._count = 0
        self._total = 0.0
        self._samples: list[float] = []
        self._weight = 1.0
        #: The count at which the next value replaces a reservoir sample.
        self._keep_at = cap + 1
        # The reservoir sorted, as of the count ``_ordered_at`` (the reservoir changes
        # only as the count grows): a run's summary is read several times.
        self._ordered: list[float] = []
        self._ordered_at = 0

    @property
    def count(self) -> int:
        self.fold()
        return self._count

    @property
    def total(self) -> float:
        self.fold()
        return self._total

    @property
    def samples(self) -> list[float]:
        self.fold()
        return self._samples

    def add(self, value: float) -> None:
        self.pending.append(value)

    def fold(self) -> None:
        """Take the pending samples in, in the order they were added."""
        pending = self.pending
        if not pending:
            return
        seen, cap = self._count, self.cap
        # Summed left to right, as one add at a time would.
        self._total = reduce(operator.add, pending, self._total)
        count = seen + len(pending)
        if seen < cap:
            self._samples.extend(pending[: cap - seen])
            if count >= cap:  # the reservoir just filled: draw the first kept position
                self._count = cap
                self._draw_next()
        samples, rand = self._samples, self.random
        while self._keep_at <= count:
            samples[int(rand() * cap)] = pending[self._keep_at - seen - 1]
            self._count = self._keep_at
            self._draw_next()
        self._count = count
        pending.clear()

    def _draw_next(self) -> None:
        """Draw the next kept position: skip a geometric run of values (algorithm L)."""
        rand = self.random
        # 1 - random() lies in (0, 1]: its log is finite.
        self._weight *= math.exp(math.log(1.0 - rand()) / self.cap)
        miss = math.log1p(-self._weight) if self._weight < 1.0 else -math.inf
        run = math.log(1.0 - rand()) / miss if miss < 0.0 else 0.0
        self._keep_at = self._count + (int(run) if run < _NEVER else _NEVER) + 1

    def ordered(self) -> list[float]:
        """The reservoir's samples in ascending order (kept until more samples come in;
        the caller must not change the list)."""
        self.fold()
        if self._ordered_at != self._count:
            self._ordered = sorted(self._samples)
            self._ordered_at = self._count
        return self._ordered

    def row(self, op: str, component: str, metric: str) -> TelemetryRow:
        ordered = self.ordered()
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
        #: Steps until the next :meth:`fold` (the driver counts them down).
        self.steps_to_fold = FOLD_STEPS
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

            to_total, to_window = total.pending.append, window.pending.append

            def both(value: float) -> None:
                to_total(value)
                to_window(value)

            return both
        return total.pending.append

    def add(self, op: str, component: str, metric: str, value: float) -> None:
        self.recorder(op, component).add(metric, value)

    def extend(self, op: str, component: str, metric: str, values: list[float]) -> None:
        """Many samples of one metric at once (a block books its rounds in bulk)."""
        key = (op, component, metric)
        self._series(self.totals, key).pending.extend(values)
        if self._windows:
            self._series(self.current, key).pending.extend(values)

    def add_operation(
        self, op: str, component: str, rpc_ms: float, extra: Mapping[str, float]
    ) -> None:
        """One finished remote operation: its round trip plus whatever the reply measured."""
        self.recorder(op, component).operation(rpc_ms, extra)

    def fold(self) -> None:
        """Fold every series' pending samples in (bounds what a long run keeps pending)."""
        self.steps_to_fold = FOLD_STEPS
        for table in (self.totals, self.current):
            for series in table.values():
                series.fold()

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
        """The totals' raw state, for :attr:`RouteReport.samples` (each reservoir in
        ascending order: its order means nothing, and a merge then sorts sorted runs)."""
        return {
            key: (s.count, s.total, tuple(s.ordered())) for key, s in self.totals.items() if s.count
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
