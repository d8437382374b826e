"""Client CPU per step of in-process CartPole routes, by where env and policy calls run.

Issue 12 items 3 and 26: ``rt.LocalEnv`` / ``rt.LocalModel`` run blocking
calls in a worker thread (``threaded=True``, timeouts fire at the deadline),
inline on the Trio thread (``threaded=False``), or adaptively (``None``, the
default: timed threaded probes, then inline while calls stay cheap). This
prints ``time.process_time`` per step over every step of the run (worker
threads included), for each placement::

    python benchmarks/local_placement.py [--routes 4] [--episodes 8]

The CartPole rule balances to the 500-step cap, so each episode is 500 steps.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

PLACEMENTS: list[tuple[str, bool | None, bool | None]] = [
    ("adaptive (default)", None, None),
    ("env+policy threaded", True, True),
    ("env inline, policy threaded", False, True),
    ("env threaded, policy inline", True, False),
    ("env+policy inline", False, False),
]


def measure(
    routes: int, episodes: int, env_threaded: bool | None, model_threaded: bool | None
) -> float:
    """Client CPU microseconds per step of one run."""
    built = [
        rt.Route(
            env=rt.LocalEnv(gym.make("CartPole-v1"), threaded=env_threaded),
            model=rt.LocalModel(cartpole_policy, threaded=model_threaded),
            seeds=list(range(i, episodes * routes, routes)),
            route_id=f"r{i}",
        )
        for i in range(routes)
    ]
    started = time.process_time()
    report = rt.run(built)
    return (time.process_time() - started) / report.total_steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per route")
    args = parser.parse_args()
    for label, env_threaded, model_threaded in PLACEMENTS:
        us = measure(args.routes, args.episodes, env_threaded, model_threaded)
        print(f"{label:<30} {us:7.1f} us client CPU per step", flush=True)


if __name__ == "__main__":
    main()
