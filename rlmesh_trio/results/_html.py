"""One self-contained HTML file per run: plots, statistics, failures and episode videos.

plotly.js is inlined once and videos are embedded as ``data:`` URIs, so the
file opens offline and can be mailed as it is. A small script fills a hidden
``<pre id="selftest">`` with what rendered (plot and video counts, video
durations, script errors); the browser test reads it, and it costs a reader
nothing.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._words import counted
from ..report._stats import statistics_block
from ._figures import FIGURES, plotly_module

if TYPE_CHECKING:
    from ..report._bundle import MediaRef
    from ..report._report import RunReport

__all__ = ["render_html", "write_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em} td,th{padding:4px 10px;border-bottom:1px solid #ddd}
th{text-align:left;background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px}
.panel{min-width:0} video{width:360px;max-width:100%;height:auto;background:#000}
.videos{display:flex;flex-wrap:wrap;gap:16px} figure{margin:0} figcaption{font-size:.85em}
.failed{color:#b00} #selftest{display:none}
"""

# The grid has a fixed column count: each plot sizes itself to its panel as it is drawn,
# before later panels exist, so an auto-fitting grid would leave the first one too wide.

# Runs before anything else so it sees every error, then reports once plots and videos settle.
_SELFTEST_HEAD = """<script>
window.__selftest={errors:[]};
window.addEventListener('error',function(e){window.__selftest.errors.push(String(e.message))});
(function(){var c=console.error;console.error=function(){
window.__selftest.errors.push(Array.prototype.join.call(arguments,' '));
c.apply(console,arguments)}})();
</script>"""

_SELFTEST_TAIL = """<script>
(function(){
function plotted(div){return div.querySelectorAll('svg.main-svg *, canvas').length>0}
function box(e){return e.getBoundingClientRect()}
function meets(a,b){return a.width>0&&b.width>0&&a.left<b.right&&b.left<a.right&&
 a.top<b.bottom&&b.top<a.bottom}
function layout(){
 var clipped=[],overlaps=[];
 document.querySelectorAll('.js-plotly-plot').forEach(function(p){
  var frame=box(p),texts=p.querySelectorAll('.xtick text,.ytick text,.g-xtitle,.g-ytitle,.legend');
  Array.prototype.forEach.call(texts,function(t){var r=box(t);
   if(r.width>0&&(r.left<frame.left-1||r.right>frame.right+1||r.top<frame.top-1||
      r.bottom>frame.bottom+1))clipped.push(p.id)});
  var title=p.querySelector('.gtitle'),bar=p.querySelector('.modebar');
  if(title&&bar&&meets(box(title),box(bar)))overlaps.push(p.id)});
 return {clipped:clipped.filter(function(v,i,a){return a.indexOf(v)===i}),overlaps:overlaps}}
function report(){
 var plots=document.querySelectorAll('.js-plotly-plot');var ok=0;
 plots.forEach(function(p){if(plotted(p))ok++});
 var vids=Array.prototype.map.call(document.querySelectorAll('video'),function(v){
  return {duration:isFinite(v.duration)?v.duration:0,readyState:v.readyState,
          error:v.error?v.error.code:null}});
 document.getElementById('selftest').textContent=JSON.stringify({plots:plots.length,
  plotsRendered:ok,panels:document.querySelectorAll('.panel').length,videos:vids,
  errors:window.__selftest.errors,layout:layout()});
}
var pending=Array.prototype.filter.call(document.querySelectorAll('video'),function(v){
 return v.readyState<1});
var left=pending.length;
pending.forEach(function(v){
 var done=function(){left--;report()};
 v.addEventListener('loadedmetadata',done,{once:true});
 v.addEventListener('error',done,{once:true})});
window.addEventListener('load',report);report();
})();
</script>"""


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _ci(pair: Sequence[float] | None) -> str:
    return "–" if not pair else f"[{pair[0]:,.2f}, {pair[1]:,.2f}]"


def _stats_table(report: RunReport, stats: Mapping[str, Any]) -> str:
    head = (
        "<tr><th>route</th><th>status</th><th>episodes</th><th>mean</th><th>95% CI</th>"
        "<th>std</th><th>IQM</th><th>IQM 95% CI</th></tr>"
    )
    rows = []
    named: list[tuple[str, str, Any]] = [
        (o.route_id, o.status, stats["routes"][o.route_id]) for o in report.routes
    ]
    named.append(("all routes", "", stats["run"]))
    for name, status, s in named:
        cls = ' class="failed"' if status in ("failed", "cancelled") else ""
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td{cls}>{html.escape(status)}</td>"
            f'<td class="n">{s["n"]}</td><td class="n">{_fmt(s["mean"])}</td>'
            f'<td class="n">{_ci(s["meanCi"])}</td><td class="n">{_fmt(s["std"])}</td>'
            f'<td class="n">{_fmt(s["iqm"])}</td><td class="n">{_ci(s["iqmCi"])}</td></tr>'
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _failures_table(report: RunReport) -> str:
    rows = []
    for o in report.routes:
        if o.status == "completed":
            continue
        kind = type(o.error).__name__ if o.error is not None else "-"
        rows.append(
            f"<tr><td>{html.escape(o.route_id)}</td><td class='failed'>{o.status}</td>"
            f"<td>{html.escape(kind)}</td><td>{html.escape(str(o.error or ''))}</td>"
            f"<td class='n'>{o.total_episodes}</td></tr>"
        )
    if not rows:
        return "<p>Every route completed.</p>"
    head = "<tr><th>route</th><th>status</th><th>error kind</th><th>message</th><th>kept</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _videos(report: RunReport, media: Mapping[tuple[str, int], Sequence[MediaRef]]) -> str:
    items = []
    for outcome in report.routes:
        for ep in outcome.episodes:
            for ref in media.get((outcome.route_id, ep.index), ()):
                if not ref.source.is_file():
                    continue
                data = base64.b64encode(ref.source.read_bytes()).decode("ascii")
                caption = (
                    f"{outcome.route_id} · episode {ep.index} · seed {ep.seed} · "
                    f"return {ep.reward:g} · {ref.camera} · {ref.frame_count} frames"
                )
                items.append(
                    '<figure><video controls muted preload="metadata" '
                    f'src="data:video/mp4;base64,{data}"></video>'
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>"
                )
    if not items:
        return ""
    return f'<h2>Recorded episodes</h2><div class="videos">{"".join(items)}</div>'


def _plots(report: RunReport) -> str:
    pio = plotly_module("plotly.io")
    panels = []
    for panel_id, build in FIGURES:
        figure = build(report)
        if figure is None:
            continue
        div = pio.to_html(
            figure,
            include_plotlyjs=False,
            full_html=False,
            div_id=f"plot-{panel_id}",
            default_width="100%",
            default_height=f"{figure.layout.height or 380}px",
            config={"displaylogo": False, "responsive": True},
        )
        panels.append(f'<div class="panel">{div}</div>')
    return f'<div class="grid">{"".join(panels)}</div>'


def render_html(
    report: RunReport,
    media: Mapping[tuple[str, int], Sequence[MediaRef]] | None = None,
    *,
    title: str = "rlmesh-trio run",
) -> str:
    """The report page as one HTML string (plotly.js and every video inlined)."""
    get_plotlyjs = plotly_module("plotly.offline").get_plotlyjs
    stats = statistics_block(report)
    summary = (
        f"{counted(len(report.routes), 'route')} · {counted(report.total_episodes, 'episode')} · "
        f"{counted(report.total_steps, 'step')} · {report.wall_s:.2f} s wall · "
        f"{report.steps_per_s:,.0f} steps/s"
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style>",
            _SELFTEST_HEAD,
            f'<script type="text/javascript">{get_plotlyjs()}</script>',
            "</head><body>",
            f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>",
            "<h2>Episode returns</h2>",
            "<p>95% bootstrap confidence intervals (percentile method, "
            f"{stats['resamples']} resamples, seed {stats['seed']}); "
            "IQM is the mean of the middle 50% of episodes.</p>",
            _stats_table(report, stats),
            _plots(report),
            "<h2>Failures</h2>",
            _failures_table(report),
            _videos(report, media or {}),
            '<pre id="selftest"></pre>',
            _SELFTEST_TAIL,
            "</body></html>",
        ]
    )


def write_html(
    report: RunReport,
    path: str | Path,
    media: Mapping[tuple[str, int], Sequence[MediaRef]] | None = None,
    *,
    title: str = "rlmesh-trio run",
) -> Path:
    """Write :func:`render_html` to ``path``; returns it.

    Raises:
        OSError: the file could not be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(report, media, title=title), encoding="utf-8")
    return path
