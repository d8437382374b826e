"""Our in-process shapes for ``hand_loop.py``: the same 32 envs and module, three ways.

* :func:`shard` (A, A' with ``batch_predicts=True``): ``rt.shard`` over 32
  env objects, one route each, sharing the module;
* :func:`lanes` (B): one route over a list of 32 envs (served as lanes);
* :func:`vector` (C): one route over a gymnasium sync vector env with
  autoreset disabled, with seeds. A tree that refuses it raises
  :class:`_hand_measure.Refused`.

Every shape runs ``seeds_for(episodes)`` and reports episodes by seed.
"""

from __future__ import annotations

from typing import Any

import _hand_policy as hp
import gymnasium as gym
from _hand_measure import Meter, Outcome, Refused, Sample, by_seed_sample

import rlmesh_trio as rt

__all__ = ["lanes", "run_routes", "shard", "vector"]


def run_routes(meter: Meter, routes: list[rt.Route], **options: Any) -> Sample:
    """``rt.run`` the routes under the meter; episodes by seed."""
    with meter.timed():
        report = rt.run(routes, **options)
    results: dict[int, Outcome] = {}
    for episode in report.episodes:
        assert episode.seed is not None  # every route here runs seeds
        results[episode.seed] = (episode.steps, episode.reward)
    return by_seed_sample(meter, results)


def shard(episodes: int, max_steps: int | None, *, batch_predicts: bool | None = None) -> Sample:
    """A / A': one route per env object (``rt.shard``), default settings or batched predicts."""
    meter = Meter()
    envs = [hp.make_env(max_steps) for _ in range(hp.LANES)]
    try:
        routes = rt.shard(envs=envs, model=hp.MODULE, seeds=hp.seeds_for(episodes))
        return run_routes(meter, routes, batch_predicts=batch_predicts)
    finally:
        for env in envs:
            env.close()


def lanes(episodes: int, max_steps: int | None) -> Sample:
    """B: one route whose env is the list of 32 env objects."""
    meter = Meter()
    envs = [hp.make_env(max_steps) for _ in range(hp.LANES)]
    try:
        route = rt.Route(env=envs, model=hp.MODULE, seeds=hp.seeds_for(episodes), route_id="B")
        return run_routes(meter, [route])
    finally:
        for env in envs:
            env.close()


def vector(episodes: int, max_steps: int | None) -> Sample:
    """C: one route over ``gym.make_vec(..., "sync")`` with autoreset disabled, with seeds.

    Raises:
        Refused: the tree refuses this env or these seeds (the row prints "refused").
    """
    meter = Meter()
    kwargs: dict[str, Any] = {} if max_steps is None else {"max_episode_steps": max_steps}
    venv = gym.make_vec(
        hp.ENV_ID,
        hp.LANES,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
        **kwargs,
    )
    try:
        try:
            route = rt.Route(env=venv, model=hp.MODULE, seeds=hp.seeds_for(episodes), route_id="C")
            return run_routes(meter, [route])
        except (rt.RlmeshTrioError, rt.RunFailed) as exc:
            raise Refused(f"{type(exc).__name__}: {exc}".splitlines()[0][:160]) from exc
    finally:
        venv.close()
