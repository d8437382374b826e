"""When grouping predicts pays: a measured choice between groups and single calls.

Grouping several routes' predicts into one call pays when the model's cost
is mostly per call (a torch forward, a round trip) and loses when it is
mostly per row (a numpy MLP on one BLAS thread) or when single calls overlap
better than one group at a time (several round trips in flight at once).
Which one holds depends on the model, the machine and the load, so it is
measured, the way :class:`~rlmesh_trio.runtime._placement.CallPlacement`
measures where an in-process call runs.

The measure is the wall time per answered predict over a *window* of
:data:`WINDOW_ROWS` answers sent in one mode: seconds per row in steady
state, so everything that differs between the modes (the model's per-call
cost, the overlap of calls in flight, the wait for a group to fill) is in
it. The clock of a window starts at its first answer, so the switch from the
other mode (calls still in flight) is not charged to it.

The rule: one window grouped, one window of single calls, then the cheaper
mode (the median of its last :data:`KEPT_SAMPLES` windows) is *chosen* and
runs until one window of the other mode re-checks it. Grouping wins only
when strictly cheaper. Three refinements keep one noisy window from deciding
for a long stretch (issue 23: on a loaded 2-core machine a single window can
cost 10x its neighbours):

* ``warmup_rows``: the first answers of a run (env resets, a model's first
  calls) are not measured at all;
* a re-probe whose window beats the chosen mode's cost is *confirmed*: its
  mode keeps running (up to :data:`KEPT_SAMPLES` windows in a row) until its
  median, now mostly fresh windows, decides, rather than waiting a whole
  interval with a stale sample in its median;
* ``probe_share``: the interval between re-probes is counted in the chosen
  mode's time, not its windows: it is :data:`REPROBE_EVERY` windows times how
  much dearer a window of the other mode is (at most :data:`MAX_STRETCH` times),
  so the probes take about one part in ``REPROBE_EVERY + 1`` of the wall time
  whatever the gap between the modes.

Cost: besides the probes, a clock read per answer (per group when grouped).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

__all__ = [
    "GROUP",
    "KEPT_SAMPLES",
    "MAX_STRETCH",
    "REPROBE_EVERY",
    "SINGLE",
    "WINDOW_ROWS",
    "GroupingRule",
]

Mode = Literal["group", "single"]
GROUP: Mode = "group"
SINGLE: Mode = "single"

#: Answers per measuring window: a few groups of 32 routes, a few dozen single calls.
WINDOW_ROWS = 128
#: Windows in the chosen mode between two re-probes of the other mode.
REPROBE_EVERY = 16
#: Windows per mode whose median is that mode's cost (a loaded machine has outliers).
KEPT_SAMPLES = 3
#: With ``probe_share``, the interval between re-probes grows at most this many times.
MAX_STRETCH = 8


class GroupingRule:
    """Chooses, window by window, whether a model's predicts are grouped or sent singly.

    ``fixed`` pins a mode (no measuring). ``clock`` (seconds) is what the
    windows are timed with. ``warmup_rows`` answers are not measured before
    the first window; ``probe_share`` counts the interval between re-probes in
    time (see the module doc). Callers tag every predict with :attr:`epoch`
    when they send it and report its answer with :meth:`answered`; answers
    from an older epoch (sent before the last switch) are not counted.
    Never blocks; not thread-safe (one Trio thread uses it).
    """

    __slots__ = (
        "_chosen",
        "_clock",
        "_confirmations",
        "_fixed",
        "_left",
        "_rows",
        "_start",
        "_warmup",
        "costs",
        "epoch",
        "mode",
        "probe_share",
        "reprobe_every",
        "switches",
        "window_rows",
    )

    def __init__(
        self,
        *,
        fixed: Mode | None = None,
        window_rows: int = WINDOW_ROWS,
        reprobe_every: int = REPROBE_EVERY,
        warmup_rows: int = 0,
        probe_share: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if window_rows < 1 or reprobe_every < 1 or warmup_rows < 0:
            raise ValueError("window_rows and reprobe_every must be >= 1, warmup_rows >= 0")
        self._fixed = fixed is not None
        self.mode: Mode = fixed if fixed is not None else GROUP
        self._chosen: Mode | None = None  # None until the first round has measured both
        self.window_rows = window_rows
        self.reprobe_every = reprobe_every
        self.probe_share = probe_share
        self._clock = clock
        #: Seconds per answered predict, latest windows per mode.
        self.costs: dict[Mode, deque[float]] = {
            GROUP: deque(maxlen=KEPT_SAMPLES),
            SINGLE: deque(maxlen=KEPT_SAMPLES),
        }
        self.epoch = 0
        self.switches = 0
        self._start: float | None = None
        self._rows = 0
        self._warmup = warmup_rows
        self._left = reprobe_every  # windows to run in the chosen mode before a probe
        self._confirmations = 0  # windows a winning probe has run beyond its first

    @property
    def grouping(self) -> bool:
        return self.mode == GROUP

    def cost(self, mode: Mode) -> float | None:
        """The measured seconds per answered predict in ``mode`` (None: not measured yet)."""
        samples = self.costs[mode]
        return statistics.median(samples) if samples else None

    def answered(self, rows: int, epoch: int) -> None:
        """``rows`` predicts sent in ``epoch`` were answered now; may close the window."""
        if self._fixed or epoch != self.epoch:
            return
        if self._warmup > 0:
            self._warmup -= rows
            return
        now = self._clock()
        if self._start is None:
            self._start = now  # the window's clock starts at its first answer
            return
        self._rows += rows
        if self._rows >= self.window_rows:
            self.sample(self.mode, (now - self._start) / self._rows)

    def sample(self, mode: Mode, seconds_per_row: float) -> None:
        """Record one window's cost for ``mode`` and choose the mode of the next window."""
        self.costs[mode].append(seconds_per_row)
        self._start, self._rows = None, 0
        group, single = self.cost(GROUP), self.cost(SINGLE)
        if group is None or single is None:  # the first round: measure the other mode
            self._switch(SINGLE if group is not None else GROUP)
            return
        best: Mode = GROUP if group < single else SINGLE
        chosen = self._chosen
        if chosen is None:  # the first round is over
            self._choose(best)
        elif mode != chosen and best != chosen:  # a probe won outright: its mode is chosen
            self._choose(best)
        elif mode != chosen:  # a probe lost on its median: confirm a winning window first
            beat = seconds_per_row < (group if chosen == GROUP else single)
            if beat and self._confirmations < KEPT_SAMPLES - 1:
                self._confirmations += 1
            else:
                self._choose(chosen)
        elif best != chosen:
            self._choose(best)
        elif self._left > 0:
            self._left -= 1
        else:  # time to re-check the other mode for one window
            self._confirmations = 0
            self._switch(SINGLE if chosen == GROUP else GROUP)

    def _choose(self, mode: Mode) -> None:
        """Run ``mode`` until the next re-probe."""
        self._chosen = mode
        self._confirmations = 0
        self._left = self._interval(mode)
        self._switch(mode)

    def _interval(self, mode: Mode) -> int:
        """Windows of the chosen ``mode`` between two re-probes (see ``probe_share``)."""
        if not self.probe_share:
            return self.reprobe_every
        chosen = self.cost(mode)
        other = self.cost(SINGLE if mode == GROUP else GROUP)
        if not chosen or other is None:
            return self.reprobe_every
        stretch = min(float(MAX_STRETCH), max(1.0, other / chosen))
        return round(self.reprobe_every * stretch)

    def _switch(self, mode: Mode) -> None:
        if self._fixed:
            return
        if mode != self.mode:
            self.switches += 1
            self.mode = mode
            self.epoch += 1
