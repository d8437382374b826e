"""The HTML report's plots, as plotly figures built from a :class:`RunReport`.

One function per figure; each returns ``None`` when the run has nothing to
show for it (no episodes, no telemetry), so the page leaves that panel out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._extras import require

if TYPE_CHECKING:
    from types import ModuleType

    from ..report._report import RunReport

__all__ = ["FIGURES", "plotly_module"]

# Latency rows shown: the client's round trip vs the time the endpoint itself reported.
_LATENCY_METRICS = {"rpc.total": "rpc", "endpoint.total": "endpoint"}
_THROUGHPUT_BINS = 40


def plotly_module(name: str) -> ModuleType:
    """A plotly module, or :class:`~rlmesh_trio.MissingExtra` naming the ``results`` extra."""
    return require(name, extra="results", purpose="the HTML report's plots (plotly)")


def _layout(fig: Any, title: str, x: str, y: str, height: int = 380) -> Any:
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"},
        xaxis={"title": x, "automargin": True},
        yaxis={"title": y, "automargin": True},
        template="plotly_white",
        height=height,
        # The toolbar stands upright at the right edge, clear of the title.
        modebar={"orientation": "v"},
        margin={"l": 60, "r": 40, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.2, "yref": "container", "yanchor": "bottom"},
    )
    return fig


def returns_figure(report: RunReport) -> Any:
    go = plotly_module("plotly.graph_objects")

    routes = [o for o in report.routes if o.episodes]
    if not routes:
        return None
    fig = go.Figure()
    for outcome in routes:
        fig.add_trace(
            go.Box(
                y=[ep.reward for ep in outcome.episodes],
                name=outcome.route_id,
                boxpoints="all" if len(outcome.episodes) <= 2000 else "outliers",
                jitter=0.4,
                pointpos=0,
                boxmean=True,
            )
        )
    return _layout(fig, "Return per episode, by route", "route", "return")


def lengths_figure(report: RunReport) -> Any:
    go = plotly_module("plotly.graph_objects")

    routes = [o for o in report.routes if o.episodes]
    if not routes:
        return None
    fig = go.Figure()
    for outcome in routes:
        fig.add_trace(
            go.Histogram(
                x=[ep.steps for ep in outcome.episodes], name=outcome.route_id, opacity=0.6
            )
        )
    fig.update_layout(barmode="overlay")
    return _layout(fig, "Episode lengths", "steps", "episodes")


def seeds_figure(report: RunReport) -> Any:
    go = plotly_module("plotly.graph_objects")

    fig = go.Figure()
    for outcome in report.routes:
        seeded = [ep for ep in outcome.episodes if ep.seed is not None]
        if seeded:
            fig.add_trace(
                go.Scatter(
                    x=[ep.seed for ep in seeded],
                    y=[ep.reward for ep in seeded],
                    mode="markers",
                    name=outcome.route_id,
                )
            )
    if not fig.data:
        return None
    return _layout(fig, "Return by seed", "seed", "return")


def latency_figure(report: RunReport) -> Any:
    go = plotly_module("plotly.graph_objects")

    rows = [r for r in report.telemetry if r.metric in _LATENCY_METRICS and r.count]
    if not rows:
        return None
    labels = [f"{r.op} · {_LATENCY_METRICS[r.metric]}" for r in rows]
    fig = go.Figure()
    for name in ("p50", "p95", "p99"):
        values = [getattr(r, name) for r in rows]
        fig.add_trace(go.Bar(y=labels, x=values, name=name, orientation="h"))
    # Bars lie down, so the operation names read level and in full (the axis grows to fit).
    fig.update_layout(barmode="group", yaxis={"autorange": "reversed"})
    height = max(380, 120 + 36 * len(rows))
    return _layout(fig, "Latency percentiles per operation", "ms", "", height)


def _episode_spans(report: RunReport) -> dict[str, list[tuple[float, float, int]]]:
    """Per route, ``(start, end, steps)`` of each episode on the route's own clock.

    Episodes of a route run one after another, so the running sum of their
    durations places each one; JSON reports carry no absolute timestamps.
    """
    spans: dict[str, list[tuple[float, float, int]]] = {}
    for outcome in report.routes:
        clock, rows = 0.0, []
        for ep in sorted(outcome.episodes, key=lambda e: e.index):
            duration = max(ep.duration_s, 0.0)
            rows.append((clock, clock + duration, ep.steps))
            clock += duration
        if rows:
            spans[outcome.route_id] = rows
    return spans


def _rates(rows: list[tuple[float, float, int]], edges: Any) -> Any:
    """Steps per second in each bin, each episode's steps spread evenly over its span."""
    import numpy as np

    table = np.asarray(rows, dtype=np.float64)
    start, end, steps = table[:, 0:1], table[:, 1:2], table[:, 2:3]
    rate = steps / np.maximum(end - start, 1e-9)
    overlap = np.clip(np.minimum(end, edges[1:]) - np.maximum(start, edges[:-1]), 0.0, None)
    return (rate * overlap).sum(axis=0) / (edges[1] - edges[0])


def throughput_figure(report: RunReport) -> Any:
    import numpy as np

    go = plotly_module("plotly.graph_objects")

    spans = _episode_spans(report)
    if not spans:
        return None
    horizon = max(rows[-1][1] for rows in spans.values()) or 1.0
    edges = np.linspace(0.0, horizon, _THROUGHPUT_BINS + 1)
    middles = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure()
    total = np.zeros(_THROUGHPUT_BINS)
    for route_id, rows in spans.items():
        rates = _rates(rows, edges)
        total += rates
        fig.add_trace(go.Scatter(x=middles, y=rates, mode="lines", name=route_id))
    if len(spans) > 1:
        fig.add_trace(go.Scatter(x=middles, y=total, mode="lines", name="all routes"))
    return _layout(fig, "Throughput over time", "seconds since the route started", "steps/s")


def failures_figure(report: RunReport) -> Any:
    go = plotly_module("plotly.graph_objects")

    kinds: dict[str, int] = {}
    for outcome in report.routes:
        if outcome.status != "completed":
            kind = type(outcome.error).__name__ if outcome.error is not None else outcome.status
            kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return None
    fig = go.Figure(go.Bar(x=list(kinds), y=list(kinds.values()), marker_color="#d62728"))
    return _layout(fig, "Routes that did not complete, by error kind", "error kind", "routes")


#: ``(panel id, builder)`` in page order.
FIGURES = (
    ("returns", returns_figure),
    ("lengths", lengths_figure),
    ("seeds", seeds_figure),
    ("latency", latency_figure),
    ("throughput", throughput_figure),
    ("failures", failures_figure),
)
