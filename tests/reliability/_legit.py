"""The legitimate client of the matrix: our runtime, a handshake and one CartPole episode.

The policy looks at the pole angle only (``1 if theta > 0 else 0``): episodes of a few
dozen steps, so one run is short and its time is mostly the server's answers.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import trio

import rlmesh_trio as rt

LEGIT_SEED = 0
#: A legitimate episode that takes longer than this has failed (and is not waited for).
LEGIT_TIMEOUT_S = 10.0


def angle_policy(obs: Any) -> int:
    """One CartPole observation -> push toward the side the pole leans to."""
    return int(float(np.asarray(obs)[2]) > 0.0)


def legit_episode(kind: str, address: str) -> float:
    """Seconds for our runtime to connect to the served ``kind`` (``env`` or ``model``),
    handshake and run one episode; the other end runs in this process.

    Raises:
        AssertionError: the route did not complete its one episode.
        trio.TooSlowError: it took longer than ``LEGIT_TIMEOUT_S``.
    """
    if kind == "env":
        route = rt.Route(env=address, model=angle_policy, seeds=[LEGIT_SEED])
    else:
        route = rt.Route(env=gym.make("CartPole-v1"), model=address, seeds=[LEGIT_SEED])

    async def bounded() -> rt.RunReport:
        with trio.fail_after(LEGIT_TIMEOUT_S):
            return await rt.run_routes([route])

    started = time.perf_counter()
    report = trio.run(bounded)
    seconds = time.perf_counter() - started
    assert report.ok and report.total_episodes == 1, f"legit client failed: {report.routes}"
    return seconds
