"""How much the orchestrator itself costs: N routes over in-process fakes (no I/O).

Usage: ``python benchmarks/orchestrator_fakes.py [--routes 32] [--episodes 20] [--length 50]``

Prints steps per second for the whole run and per route, and the peak memory
per route (tracemalloc peak of the run, divided by the route count; and the
process RSS growth). The fakes (``rlmesh_trio.testing``) answer instantly, so
this measures the driver, hooks plumbing and the nursery, not any transport.

The fakes are not free (each call checks its script and yields once to the
scheduler), so their own CPU is measured apart: the calls one route made
(recorded on the first run) are replayed on fresh fakes from N bare tasks,
and ``driver CPU per step`` is the whole run's CPU less that.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from typing import Any

import trio

import rlmesh_trio as rt
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

#: The per-step calls of one route, in order: (endpoint, method, request).
Calls = list[tuple[str, str, Any]]


class _LoggedEnv(ScriptedEnv):
    """A fake env that logs its reset/step requests (for the fakes-alone replay)."""

    def __init__(self, log: Calls, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log

    async def reset(self, request: Any) -> Any:
        self.log.append(("env", "reset", request))
        return await super().reset(request)

    async def step(self, request: Any) -> Any:
        self.log.append(("env", "step", request))
        return await super().step(request)


class _LoggedModel(ScriptedModel):
    def __init__(self, log: Calls, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log

    async def predict(self, request: Any) -> Any:
        self.log.append(("model", "predict", request))
        return await super().predict(request)


def _routes(n: int, episodes: int, length: int, log: Calls | None = None) -> list[rt.Route]:
    def env() -> ScriptedEnv:
        if log is None:
            return ScriptedEnv(episode_lengths=length, record=False)
        return _LoggedEnv(log, episode_lengths=length, record=False)

    def model() -> ScriptedModel:
        return ScriptedModel(record=False) if log is None else _LoggedModel(log, record=False)

    return [
        rt.Route(env=env(), model=model(), episodes=episodes, route_id=f"r{i}") for i in range(n)
    ]


def _fakes_alone(n: int, length: int, calls: Calls) -> float:
    """CPU seconds of ``n`` bare tasks replaying one route's calls on fresh fakes."""

    async def replay() -> None:
        env, model = ScriptedEnv(episode_lengths=length, record=False), ScriptedModel(record=False)
        endpoints = {"env": env, "model": model}
        for endpoint, method, request in calls:
            await getattr(endpoints[endpoint], method)(request)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(replay)

    cpu = time.process_time()
    trio.run(main)
    return time.process_time() - cpu


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--length", type=int, default=50)
    args = parser.parse_args()

    n = args.routes
    calls: Calls = []
    trio.run(rt.run_routes, _routes(1, args.episodes, args.length, calls))  # also warms up
    # Speed first, with nothing watching allocations.
    started = time.perf_counter()
    cpu = time.process_time()
    report = trio.run(rt.run_routes, _routes(n, args.episodes, args.length))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    steps = report.total_steps
    assert report.ok and steps == n * args.episodes * args.length
    fakes = _fakes_alone(n, args.length, calls)
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
    print(f"  fakes' own          {fakes / steps * 1e6:.1f} us (replayed alone)")
    print(f"  driver              {(cpu - fakes) / steps * 1e6:.1f} us")
    print(f"peak traced memory    {peak / 1024:,.0f} KiB, {peak / 1024 / n:,.1f} KiB/route")
    print(f"max RSS growth        {rss_growth:,} KiB, {rss_growth / n:,.1f} KiB/route")


if __name__ == "__main__":
    main()
