"""Profile our client's hot path for cases 1 and 3 of ``compare_rlmesh.py``.

Starts the rlmesh 0.1.0 env and model servers as subprocesses (as the
benchmark does), then runs our side of one case under a profiler::

    python benchmarks/profile_hot_path.py --case 1 --profiler cprofile   # by function, calls/step
    python benchmarks/profile_hot_path.py --case 3 --profiler pyinstrument  # sampled call tree

``pyinstrument`` is not a project dependency (``pip install pyinstrument``
to use it); ``cprofile`` needs nothing. Only this process is profiled.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
import warnings
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import trio  # noqa: E402

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio.inprocess._demo_policy import cartpole_policy  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402

#: (substring of a frame's file or function name, area), first match wins.
_AREAS = (
    ("epoll.poll", "idle: epoll wait (not CPU)"),
    ("<built-in>:compile", "startup: imports (one-off)"),
    ("<built-in>:loads", "startup: imports (one-off)"),
    ("importlib", "startup: imports (one-off)"),
    ("attr/_make.py", "startup: imports (one-off)"),
    ("dataclasses.py", "startup: imports (one-off)"),
    ("/gymnasium/", "gymnasium env"),
    ("rlmesh_trio/_envhost", "ours: env host"),
    ("rlmesh_trio/inprocess/_local_env", "ours: env host"),
    ("method 'poll' of 'select.epoll'", "idle: epoll wait (not CPU)"),
    ("socket", "socket syscalls (send/recv)"),
    ("betterproto2", "betterproto2 encode/decode"),
    ("grpclib", "grpclib"),
    ("/h2/", "h2/hpack/hyperframe (HTTP/2)"),
    ("/hpack/", "h2/hpack/hyperframe (HTTP/2)"),
    ("/hyperframe/", "h2/hpack/hyperframe (HTTP/2)"),
    ("trio_asyncio", "trio_asyncio loop (bridge)"),
    ("/asyncio/", "asyncio stdlib (under trio_asyncio)"),
    ("/trio/", "trio core"),
    ("/outcome/", "trio core"),
    ("rlmesh_trio/runtime", "ours: runtime driver"),
    ("rlmesh_trio/transport", "ours: transport"),
    ("rlmesh_trio/spaces", "ours: value codec / model host"),
    ("rlmesh_trio/_modelhost", "ours: value codec / model host"),
    ("rlmesh_trio/inprocess/_local_model", "ours: value codec / model host"),
    ("rlmesh_trio/inprocess/_demo_policy", "ours: value codec / model host"),
    ("rlmesh_trio/orchestrator", "ours: orchestrator"),
    ("numpy", "numpy"),
    ("warnings", "warnings (betterproto2 default fields)"),
    ("contextlib", "contextlib"),
)


def _area(where: str) -> str:
    for needle, area in _AREAS:
        if needle in where:
            return area
    return "other"


def _print_areas(totals: dict[str, float], steps: int) -> None:
    busy = sum(v for k, v in totals.items() if not k.startswith("idle"))
    print(f"\nself time by area ({steps} steps; % of non-idle time, us per step):")
    for area, value in sorted(totals.items(), key=lambda kv: -kv[1]):
        share = "" if area.startswith("idle") else f"{value / busy * 100:5.1f}%"
        print(f"  {area:<42} {share:>6}  {value / steps * 1e6:7.0f} us/step")


def _cprofile_areas(stats: pstats.Stats) -> dict[str, float]:
    totals: dict[str, float] = {}
    for (path, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{func}"
        if path == "~":
            where = func  # a built-in: name it by function (socket.send, epoll.poll, ...)
        area = _area(where)
        if area == "other" and "betterproto2" in func:
            area = "betterproto2 encode/decode"
        totals[area] = totals.get(area, 0.0) + tottime
    return totals


def _pyinstrument_areas(
    frame: Any, totals: dict[str, float], by_function: dict[str, float]
) -> None:
    children = list(frame.children)
    own = frame.time - sum(c.time for c in children)
    where = f"{frame.file_path or ''}:{frame.function or ''}"
    for child in children:
        if child.is_synthetic_leaf:  # "[self]": time spent in the parent's own code
            own += child.time
        else:
            _pyinstrument_areas(child, totals, by_function)
    if own > 0:
        area = _area(where)
        totals[area] = totals.get(area, 0.0) + own
        by_function[where] = by_function.get(where, 0.0) + own


def _print_functions(by_function: dict[str, float], steps: int, top: int) -> None:
    print(f"\nself time by function, top {top} (us per step):")
    for where, value in sorted(by_function.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {value / steps * 1e6:7.1f}  {where.replace(sys.prefix, '<venv>')}")


def _route(case: str, env: str, model: str | None, seeds: list[int]) -> rt.Route:
    if case == "1":
        return rt.Route(env=env, model=model, seeds=seeds)
    return rt.Route(env=env, model=cartpole_policy, seeds=seeds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=["1", "3"], default="1")
    parser.add_argument(
        "--profiler", choices=["cprofile", "pyinstrument", "none"], default="cprofile"
    )
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--interval", type=float, default=0.001, help="pyinstrument sampling s")
    parser.add_argument(
        "--cpu-clock", action="store_true", help="pyinstrument: sample on CPU time, not wall time"
    )
    parser.add_argument("--sort", default="tottime", help="cProfile sort key")
    args = parser.parse_args()

    with _servers.rlmesh_env() as env, _servers.rlmesh_model() as model:
        seeds = list(range(args.episodes))
        # Warm-up: imports, spec caches, first connections.
        rt.run([_route(args.case, env.address, model.address, [0])])
        route = _route(args.case, env.address, model.address, seeds)

        profiler: Any = None
        if args.profiler == "cprofile":
            profiler = cProfile.Profile()
            profiler.enable()
        elif args.profiler == "pyinstrument":
            from pyinstrument import Profiler

            if args.cpu_clock:
                # Sample on this thread's CPU clock: time spent off-CPU (a send that lets the
                # server run first, epoll waits) is not charged to whatever was on the stack.
                from pyinstrument.stack_sampler import get_stack_sampler

                get_stack_sampler().timer_func = time.thread_time
            profiler = Profiler(interval=args.interval, async_mode="disabled")
            profiler.start()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        report = trio.run(rt.run_routes, [route])
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if args.profiler == "cprofile":
            profiler.disable()
        elif args.profiler == "pyinstrument":
            profiler.stop()

    steps = report.total_steps
    print(
        f"case {args.case}: {steps} steps in {wall:.2f}s = {steps / wall:.0f} steps/s, "
        f"cpu {cpu / steps * 1e6:.0f} us/step (profiler: {args.profiler}, overhead included)"
    )
    if args.profiler == "cprofile":
        stats = pstats.Stats(profiler)
        stats.sort_stats(args.sort).print_stats(args.top)
        _print_areas(_cprofile_areas(stats), steps)
    elif args.profiler == "pyinstrument":
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        totals: dict[str, float] = {}
        by_function: dict[str, float] = {}
        root = profiler.last_session.root_frame(trim_stem=False)
        _pyinstrument_areas(root, totals, by_function)
        _print_functions(by_function, steps, args.top)
        _print_areas(totals, steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
