"""How much the orchestrator itself costs: N routes over in-process fakes (no I/O).

Usage: ``python benchmarks/orchestrator_fakes.py [--routes 32] [--episodes 20] [--length 50]``

Prints steps per second for the whole run and per route, and the peak memory
per route (tracemalloc peak of the run, divided by the route count; and the
process RSS growth). The fakes (``rlmesh_trio.testing``) answer instantly, so
this measures the driver, hooks plumbing and the nursery, not any transport.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import trio

import rlmesh_trio as rt
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


def _routes(n: int, episodes: int, length: int) -> list[rt.Route]:
    return [
        rt.Route(
            env=ScriptedEnv(episode_lengths=length, record=False),
            model=ScriptedModel(record=False),
            episodes=episodes,
            route_id=f"r{i}",
        )
        for i in range(n)
    ]


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--length", type=int, default=50)
    args = parser.parse_args()

    trio.run(rt.run_routes, _routes(2, 2, 5))  # warm imports and caches
    n = args.routes
    # Speed first, with nothing watching allocations.
    started = time.perf_counter()
    cpu = time.process_time()
    report = trio.run(rt.run_routes, _routes(n, args.episodes, args.length))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    steps = report.total_steps
    assert report.ok and steps == n * args.episodes * args.length
    # Then memory, on a second identical run.
    rss_before = _rss_kib()
    tracemalloc.start()
    trio.run(rt.run_routes, _routes(n, args.episodes, args.length))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = _rss_kib() - rss_before
    print(f"routes                {n}")
    print(f"steps                 {steps:,}")
    print(f"wall                  {wall:.2f} s")
    print(f"steps/s (all routes)  {steps / wall:,.0f}")
    print(f"steps/s per route     {steps / wall / n:,.0f}")
    print(f"CPU per step          {cpu / steps * 1e6:.1f} us")
    print(f"peak traced memory    {peak / 1024:,.0f} KiB, {peak / 1024 / n:,.1f} KiB/route")
    print(f"max RSS growth        {rss_growth:,} KiB, {rss_growth / n:,.1f} KiB/route")


if __name__ == "__main__":
    main()
