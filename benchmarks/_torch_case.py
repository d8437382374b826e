"""Cases 7 and 8 of ``compare_rlmesh.py``: where batching must pay (issue 23).

Both share one torch MLP (``_torch_mlp.py``: 4 -> 256 -> 256 -> 2, one
thread), whose cost is mostly per call, across :data:`ROUTES` CartPole
routes, each with its own in-process env (a gymnasium env object).

* Case 7: the MLP is served. Ours: our ``ModelServer`` (``rlmesh-trio
  serve-model``) driven by our runtime, unbatched and with
  ``batch_predicts``; theirs: rlmesh 0.1.0's runtime, one ``rlmesh.run`` per
  env in :data:`ROUTES` threads, against an ``rlmesh.torch.Model`` server of
  the same network (its way to run many envs at once). rlmesh runs a served
  model only against env *clients*, so its 32 envs are rlmesh ``EnvServer`` s
  in one child process (their CPU shows under "servers", not the client).
* Case 8: everything in process, ours only: the routes share the policy
  object directly, unbatched and with ``batch_predicts``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

import rlmesh_trio as rt

#: Routes (in-process envs) sharing the one model.
ROUTES = 32
#: Case 7: batched / unbatched, batched / rlmesh's threads. Case 8: batched / unbatched.
TARGET_SERVED_VS_UNBATCHED = 2.5
TARGET_SERVED_VS_RLMESH = 2.5
TARGET_LOCAL_VS_UNBATCHED = 2.0
#: What ``rlmesh-trio serve-model`` serves in case 7 (imported from the repository root).
POLICY_SPEC = "benchmarks._torch_mlp:POLICY"


def _dealt(seeds: list[int]) -> list[list[int]]:
    return [seeds[i::ROUTES] for i in range(ROUTES)]


def _routes(model: Any, env_id: str, seeds: list[int]) -> list[rt.Route]:
    return [
        rt.Route(env=gym.make(env_id), model=model, seeds=mine, route_id=f"torch{i}")
        for i, mine in enumerate(_dealt(seeds))
    ]


def served_sides(
    env_id: str,
    our_model: str,
    their_model: str,
    their_envs: list[str],
    seeds: list[int],
    ours: Callable[..., Any],
    theirs: Callable[[list[Callable[[], Any]]], Any],
) -> list[tuple[str, Callable[[], Any]]]:
    """Case 7: (label, run) for ``ours``, ``ours+batch`` and ``theirs`` over the same seeds."""
    import rlmesh

    def job(env: str, mine: list[int]) -> Callable[[], Any]:
        return lambda: rlmesh.run(rlmesh.RemoteModel(their_model), env, seeds=mine)

    jobs = [job(env, mine) for env, mine in zip(their_envs, _dealt(seeds), strict=True)]
    return [
        ("ours", lambda: ours(_routes(our_model, env_id, seeds))),
        ("ours+batch", lambda: ours(_routes(our_model, env_id, seeds), batch_predicts=True)),
        ("theirs", lambda: theirs(jobs)),
    ]


def ceiling_row(unbatched: Any, batched: Any, fmt: Callable[..., str]) -> list[str]:
    """Case 7's bound, as a table row: the batched run cannot step faster than its own
    client process can (one Python thread: wall per step >= client CPU per step), so
    batched / unbatched is at most the unbatched wall per step over the batched client's
    CPU per step. Columns: batched client CPU (us/step), unbatched wall (us/step), bound."""
    rate, cpu = unbatched.median_rate(), batched.median_cpu_us()
    wall = 1e6 / rate if rate else None
    bound = wall / cpu if wall and cpu else None
    met = "n/a" if bound is None else ("yes" if bound >= TARGET_SERVED_VS_UNBATCHED else "no")
    target = f">= {TARGET_SERVED_VS_UNBATCHED}"
    return ["7 ceiling (client-bound)", fmt(cpu), fmt(wall), fmt(bound, ".2f"), target, met]


def local_sides(
    env_id: str, seeds: list[int], ours: Callable[..., Any]
) -> list[tuple[str, Callable[[], Any]]]:
    """Case 8: (label, run) for ``ours`` and ``ours+batch``, the policy in process."""
    import _torch_mlp  # torch is imported only when case 8 runs

    policy = _torch_mlp.POLICY
    return [
        ("ours", lambda: ours(_routes(policy, env_id, seeds))),
        ("ours+batch", lambda: ours(_routes(policy, env_id, seeds), batch_predicts=True)),
    ]
