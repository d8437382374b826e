"""One process vs shards on the same work; Ray's start-up and per-shard overhead; 1000 routes.

    python benchmarks/distributed.py [--routes 8] [--episodes 10] [--skip-ray]

Work: in-process CartPole routes (env factory + the built-in policy), so the
numbers measure the coordinator and the backends, not a network. Every
distributed run is checked to give the same episodes as the local run.
Prints wall times and ratios (local / distributed; > 1 means the shards won).
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import gymnasium

import rlmesh_trio as rt
from rlmesh_trio import run_distributed
from rlmesh_trio.inprocess._demo_policy import cartpole_policy


def routes(count: int, episodes: int, max_steps: int | None = None) -> list[rt.Route]:
    make = functools.partial(gymnasium.make, "CartPole-v1")
    return [
        rt.Route(
            env=make,
            model=cartpole_policy,
            seeds=range(i * episodes, (i + 1) * episodes),
            route_id=f"r{i}",
            max_episode_steps=max_steps,
        )
        for i in range(count)
    ]


def keys(report: rt.RunReport) -> list[tuple[str, int, Any, int]]:
    return [(o.route_id, e.index, e.seed, e.steps) for o in report.routes for e in o.episodes]


def timed(fn: Callable[[], rt.RunReport]) -> tuple[float, rt.RunReport]:
    started = time.perf_counter()
    report = fn()
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    work = routes(args.routes, args.episodes)
    local_s, local = timed(lambda: rt.run(work))
    rows = [("local, one process", local_s, local.total_steps)]
    proc_s, proc = timed(lambda: run_distributed(work, "processes", shards=2))
    assert keys(proc) == keys(local), "processes gave other episodes"
    rows.append(("processes, 2 shards", proc_s, proc.total_steps))
    if not args.skip_ray:
        rows += ray_rows(work, local)
    many = routes(1000, 1, max_steps=20)
    many_local_s, many_local = timed(lambda: rt.run(many))
    many_proc_s, many_proc = timed(lambda: run_distributed(many, "processes", shards=2))
    assert keys(many_proc) == keys(many_local)
    rows.append(("1000 routes x 20 steps, local", many_local_s, many_local.total_steps))
    rows.append(("1000 routes x 20 steps, 2 processes", many_proc_s, many_proc.total_steps))
    print(f"{'case':<40} {'wall s':>8} {'steps/s':>9} {'vs local':>9}")
    for name, wall, steps in rows:
        base = many_local_s if name.startswith("1000") else local_s
        print(f"{name:<40} {wall:8.2f} {steps / wall:9.0f} {base / wall:9.2f}")


def ray_rows(work: list[rt.Route], local: rt.RunReport) -> list[tuple[str, float, int]]:
    import ray

    folder = tempfile.mkdtemp(prefix="rtray-", dir="/tmp")
    os.environ.update(RAY_TMPDIR=folder, RAY_USAGE_STATS_ENABLED="0")
    init_s = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - init_s
    try:
        cold_s, _ = timed(lambda: run_distributed(work, "ray", shards=2))
        warm_s, warm = timed(lambda: run_distributed(work, "ray", shards=2))
        assert keys(warm) == keys(local), "ray gave other episodes"
        tiny = routes(2, 1, max_steps=1)
        overhead_s, _ = timed(lambda: run_distributed(tiny, "ray", shards=2))
    finally:
        ray.shutdown()
    print(f"ray.init: {init_s:.2f} s; two 1-step shards end to end: {overhead_s:.2f} s")
    return [
        ("ray, 2 shards (first run: workers start)", cold_s, warm.total_steps),
        ("ray, 2 shards (warm)", warm_s, warm.total_steps),
    ]


if __name__ == "__main__":
    main()
