"""Case 6 of ``compare_rlmesh.py``: everything in process (issue 12 item 26).

Our side: routes whose env is a gymnasium env object (an in-process
``LocalEnv``, which runs cheap calls inline after its first timed calls) and
whose model is a plain policy callable (an in-process ``LocalModel``). Their
side: ``rlmesh.run(rlmesh.numpy.Model(policy), env, seeds=...)`` with a
gymnasium env object, rlmesh 0.1.0's native local loop, one thread per route.
No server and no socket on either side; the figure that matters is the client
CPU per step (target: <= 60 us on 2 cores).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

#: In-process routes in case 6 (the issue's figure is for four).
ROUTES = 4
#: Client CPU per step the case aims for, microseconds.
CPU_TARGET_US = 60.0


def local_sides(
    env_id: str,
    episodes: int,
    ours: Callable[[list[rt.Route]], Any],
    theirs: Callable[[list[Callable[[], Any]]], Any],
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The two zero-argument runs of case 6 (``ours(routes)``, ``theirs(jobs)`` measure)."""
    import rlmesh
    import rlmesh.numpy as rnp

    dealt = [list(range(i, episodes * ROUTES, ROUTES)) for i in range(ROUTES)]

    def run_ours() -> Any:
        routes = [
            rt.Route(env=gym.make(env_id), model=cartpole_policy, seeds=seeds, route_id=f"local{i}")
            for i, seeds in enumerate(dealt)
        ]
        return ours(routes)

    def job(seeds: list[int]) -> Callable[[], Any]:
        return lambda: rlmesh.run(rnp.Model(cartpole_policy), gym.make(env_id), seeds=seeds)

    def run_theirs() -> Any:
        return theirs([job(seeds) for seeds in dealt])

    return run_ours, run_theirs
