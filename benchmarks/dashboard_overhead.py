"""What the live dashboard costs a run: case 2 of ``compare_rlmesh.py`` with and without it.

Run from the repository root (needs the ``interop`` and ``dashboard`` extras and Debian's
chromium)::

    python benchmarks/dashboard_overhead.py                 # 5 pairs, 3 episodes per route
    python benchmarks/dashboard_overhead.py --pairs 9 --episodes 4

Four rlmesh 0.1.0 env servers and one rlmesh model server, each in its own
subprocess on 127.0.0.1, as in case 2. Runs alternate (A B, B A, ...) after an
unmeasured warm-up of each: ``plain`` is ``run_routes(routes)``; ``dashboard``
is the same with ``hooks=rt.hooks.Dashboard(routes)`` and the page open in
headless Chromium (connected to its event stream before the run starts).
Each run's wall time is measured around ``trio.run(run_routes)`` only (the
final report is rendered outside it, and the browser is back on a blank page
before the next run). Printed: the median steps/s of each
side and the ratio dashboard/plain (target: within 3%, i.e. >= 0.97).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import trio  # noqa: E402

import rlmesh_trio as rt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import _servers  # noqa: E402

from tests._cdp import Browser  # noqa: E402

ROUTES = 4


CPU: dict[str, list[float]] = {"plain": [], "dashboard": [], "browser": []}


def _browser_cpu(page: Browser | None) -> float:
    """CPU seconds Chromium's processes used so far (from /proc; 0 without a browser)."""
    if page is None:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in page.pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _run(
    routes: list[rt.Route], hooks: rt.RuntimeHooks | None, page: Browser | None = None
) -> tuple[float, rt.RunReport]:
    async def main() -> rt.RunReport:
        return await rt.run_routes(routes, hooks=hooks)

    start, cpu, browser = time.perf_counter(), time.process_time(), _browser_cpu(page)
    report = trio.run(main)
    wall = time.perf_counter() - start
    side = "plain" if hooks is None else "dashboard"
    CPU[side].append((time.process_time() - cpu) / report.total_steps * 1e6)
    if page is not None:
        CPU["browser"].append((_browser_cpu(page) - browser) / report.total_steps * 1e6)
    failed = [o for o in report.routes if o.status != "completed"]
    if failed:
        raise SystemExit(f"route {failed[0].route_id} {failed[0].status}: {failed[0].error}")
    return report.total_steps / wall, report


def _with_dashboard(routes: list[rt.Route], page: Browser | None) -> float:
    with rt.hooks.Dashboard(routes, title="dashboard overhead") as dash:
        assert dash.url is not None
        if page is None:  # --no-browser: the server and hook alone
            rate, report = _run(routes, dash)
            dash.finish(report)
            return rate
        page.open(dash.url)
        page.wait_for("document.querySelectorAll('#routes tr').length === 4", what="the grid")
        page.wait_for("document.body.dataset.version", what="the event stream")
        rate, report = _run(routes, dash, page)
        dash.finish(report)
        page.wait_for(
            "location.pathname.endsWith('/report') && document.getElementById('selftest')"
            " && document.getElementById('selftest').textContent",
            what="the final report, drawn",
        )
    # The next run starts with the browser idle, as a plain run has it.
    page.open("about:blank")
    page.wait_for("location.href === 'about:blank'", what="a blank page")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=3, help="episodes per route")
    parser.add_argument(
        "--no-browser", action="store_true", help="serve the page but open no browser on it"
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        model = stack.enter_context(_servers.rlmesh_model())
        envs = [stack.enter_context(_servers.rlmesh_env("CartPole-v1")) for _ in range(ROUTES)]
        page = None if args.no_browser else stack.enter_context(Browser())
        seeds = list(range(args.episodes * ROUTES))
        routes = rt.shard([e.address for e in envs], model.address, seeds=seeds)
        _run(routes, None)  # warm-ups, unmeasured
        _with_dashboard(routes, page)
        plain: list[float] = []
        live: list[float] = []
        for pair in range(args.pairs):
            # A B, then B A: a drift in the machine's load falls on both sides alike.
            if pair % 2 == 0:
                plain.append(_run(routes, None)[0])
                live.append(_with_dashboard(routes, page))
            else:
                live.append(_with_dashboard(routes, page))
                plain.append(_run(routes, None)[0])
            print(f"pair {pair + 1}: plain {plain[-1]:,.0f}  dashboard {live[-1]:,.0f} steps/s")
        if page is not None and page.errors:
            print("page errors:", page.errors)
    a, b = statistics.median(plain), statistics.median(live)
    print(f"median steps/s: plain {a:,.0f}  dashboard {b:,.0f}")
    print(f"ratio dashboard/plain: {b / a:.3f} (target >= 0.97)")
    for side, values in CPU.items():
        if values:
            print(f"{side} CPU: {statistics.median(values):.0f} us/step (median)")


if __name__ == "__main__":
    main()
