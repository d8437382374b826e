"""The server side of the page, without the web stack: snapshots, statistics, videos, the report.

The :class:`Hub` turns a :class:`DashboardState` into what the page fetches.
Statistics (bootstrap CIs) are recomputed at most every :data:`STATS_PERIOD`
seconds and only when new returns arrived, on a worker thread of the
server's loop, from a bounded sample: never per event, never on the run's loop.
When the run is over, :meth:`Hub.final_statistics` replaces them with the
figures of the run's report (every episode, in the report's order): the last
snapshot shows what the JSON report says.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._state import DashboardState

__all__ = [
    "NO_ICON",
    "STATS_DUTY",
    "STATS_PERIOD",
    "TICK",
    "Hub",
    "live_statistics",
    "report_statistics",
    "warm_statistics",
]

log = logging.getLogger("rlmesh_trio.dashboard")

#: How often the page is sent a new snapshot (when something changed).
TICK = 1.0
#: The shortest time between two statistics computations.
STATS_PERIOD = 2.0
#: And at least this many times what the last one took: the bootstrap's share of a
#: core stays under 2% however large the sample.
STATS_DUTY = 50
#: Returns bootstrapped for the intervals (drawn from the kept sample).
BOOTSTRAP_SAMPLE = 1000
HISTOGRAM_BINS = 24
#: A page that names its icon inline sends no favicon request.
NO_ICON = '<link rel="icon" href="data:,">'


def live_statistics(rewards: Sequence[float], seen: int) -> dict[str, Any]:
    """Mean and IQM with 95% bootstrap CIs, and a histogram, of the sampled returns.

    The point figures use the whole sample; the intervals a seeded subsample
    of at most :data:`BOOTSTRAP_SAMPLE`, so one computation stays under ~0.1 s.
    """
    from ..results import summarize

    values = np.asarray(rewards, dtype=np.float64)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        return {"n": 0, "seen": seen}
    if len(values) <= BOOTSTRAP_SAMPLE:
        figures = summarize(values).to_dict()
    else:
        pick = np.random.default_rng(0).choice(len(values), BOOTSTRAP_SAMPLE, replace=False)
        figures = summarize(values[pick]).to_dict()
        figures.update(_points(values))
    figures["seen"] = seen
    figures["histogram"] = _histogram(values)
    return figures


def report_statistics(report: Any) -> dict[str, Any]:
    """The figures of a finished run's ``report``, as :func:`live_statistics` shapes them.

    Every episode in the report's order (routes, then episodes), so ``n``,
    the mean, the IQM and their CIs are exactly the JSON report's
    ``statistics.run``, whatever the live sample held.
    """
    from ..results import summarize

    rewards = [ep.reward for outcome in report.routes for ep in outcome.episodes]
    figures = summarize(rewards).to_dict()
    values = np.asarray(rewards, dtype=np.float64)
    values = values[np.isfinite(values)]
    figures["seen"] = len(rewards)
    if len(values):
        figures["histogram"] = _histogram(values)
    return figures


def warm_statistics() -> None:
    """Do the statistics' first-use work (importing scipy, its bootstrap's first call) once.

    Not counted in the time a computation took: with it, the first one took
    about a second, and the next waited ``STATS_DUTY`` times that, well past
    the end of a short run.
    """
    from ..results import summarize

    try:
        summarize([0.0, 1.0])
    except Exception as exc:  # e.g. scipy missing: the computation itself will say so
        log.debug("dashboard: statistics not warmed: %s", exc)


def _histogram(values: np.ndarray) -> dict[str, Any]:
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS)
    return {"counts": counts.tolist(), "edges": edges.tolist()}


def _points(values: np.ndarray) -> dict[str, Any]:
    """The point figures of the whole sample (as :func:`~rlmesh_trio.results.summarize`)."""
    from scipy import stats

    return {
        "n": len(values),
        "mean": float(np.mean(values)),
        "std": float(np.std(values, ddof=1)),
        "iqm": float(stats.trim_mean(values, 0.25)),
    }


class Hub:
    """What the page reads: the state, its statistics, recorded videos and the final report.

    ``token``: when set, every request but the sign-in page must carry it
    (cookie or ``Authorization: Bearer``); compared in constant time.
    ``recording``: a :class:`~rlmesh_trio.results.Recording` whose finished
    videos are listed as they appear.
    """

    def __init__(
        self, state: DashboardState, *, token: str | None = None, recording: Any = None
    ) -> None:
        self.state = state
        self.token = token
        self.recording = recording
        self.stats: dict[str, Any] = {}
        self._stats_version = -1
        self._stats_lock = threading.Lock()
        self._stats_final = False
        #: Grows after each new ``stats`` (a snapshot is rebuilt when it or the state changed).
        self._stats_generation = 0
        self._snapshot: tuple[tuple[int, int], str] = ((-1, -1), "")
        self._videos: dict[int, Path] = {}
        self._seen_media: set[tuple[str, int, int]] = set()
        self.report_html: str | None = None
        self._streams = 0
        self._finals_sent = 0
        self._reports_served = 0
        self._streams_changed = threading.Condition()

    # -- access ------------------------------------------------------------------
    def allowed(self, cookie: str | None, header: str | None) -> bool:
        """Whether a request may see the page (always, without a token)."""
        if self.token is None:
            return True
        given = cookie or ""
        if header and header.lower().startswith("bearer "):
            given = header[7:].strip()
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    # -- what the page reads ---------------------------------------------------
    def snapshot_json(self) -> str:
        """The current snapshot as JSON, built once per state version."""
        version = (self.state.version, self._stats_generation)
        cached_version, text = self._snapshot
        if cached_version != version or not text:
            text = json.dumps(self.state.snapshot(self.stats), separators=(",", ":"))
            self._snapshot = (version, text)
        return text

    def refresh_statistics(self) -> float:
        """Recompute the statistics if returns arrived since the last time (blocking).

        Returns the seconds the computation took (0 when there was nothing new
        to compute, or the final figures are set).
        """
        with self._stats_lock:
            version = self.state.reward_version
            if self._stats_final or version == self._stats_version:
                return 0.0
            started = time.perf_counter()
            rewards, seen = self.state.rewards()
            self.stats = live_statistics(rewards, seen)
            self._stats_version = version
            self._stats_generation += 1
            return time.perf_counter() - started

    def final_statistics(self, report: Any = None) -> None:
        """The run is over: show ``report``'s figures (:func:`report_statistics`) from now on,
        or without a report, the statistics of every return seen (recomputed now, not at the
        next period). Blocking; no periodic refresh replaces them afterwards."""
        with self._stats_lock:
            if report is not None:
                self.stats = report_statistics(report)
            else:
                rewards, seen = self.state.rewards()
                self.stats = live_statistics(rewards, seen)
            self._stats_final = True
            self._stats_version = self.state.reward_version
            self._stats_generation += 1

    def refresh_videos(self) -> None:
        """List videos the recording finished since the last look."""
        media: Mapping[tuple[str, int], Sequence[Any]] = getattr(self.recording, "media", {})
        for (route_id, episode), refs in list(media.items()):
            for n, ref in enumerate(list(refs)):
                key = (route_id, episode, n)
                if key in self._seen_media:
                    continue
                self._seen_media.add(key)
                video_id = len(self._videos)
                self._videos[video_id] = Path(ref.source)
                caption = f"{route_id} · episode {episode} · {ref.frame_count} frames"
                self.state.video(route_id, episode, f"video/{video_id}", caption)

    def video_bytes(self, video_id: int) -> bytes | None:
        path = self._videos.get(video_id)
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError:  # the recording's staging folder was cleaned up
            return None

    def set_report(self, html_text: str) -> None:
        # No favicon request from the report page: the server may be gone by then.
        self.report_html = html_text.replace("<head>", f"<head>{NO_ICON}", 1)
        self.state.report_ready()

    # -- open pages ------------------------------------------------------------
    def stream_opened(self) -> None:
        with self._streams_changed:
            self._streams += 1
            self._streams_changed.notify_all()

    def stream_closed(self) -> None:
        with self._streams_changed:
            self._streams -= 1
            self._streams_changed.notify_all()

    def final_sent(self) -> None:
        with self._streams_changed:
            self._finals_sent += 1

    def report_served(self) -> None:
        with self._streams_changed:
            self._reports_served += 1
            self._streams_changed.notify_all()

    def wait_streams_closed(self, timeout: float) -> bool:
        """Block until no page is following the run and each page told of the end fetched the
        report, or ``timeout`` seconds passed; whether they all did."""

        def settled() -> bool:
            return self._streams <= 0 and self._reports_served >= self._finals_sent

        with self._streams_changed:
            return self._streams_changed.wait_for(settled, timeout)
