"""The rows ``hand_loop.py`` measures us against: what users write without us.

* :func:`plain`: the hand-written loop over ``gym.make_vec(..., "sync")``,
  one forward per step (the reference every ratio is taken against);
* :func:`async_vector`: the same loop over gymnasium's ``AsyncVectorEnv``
  (one subprocess per env, the policy in this process);
* :func:`sb3`: Stable-Baselines3's ``evaluate_policy`` over a ``DummyVecEnv``;
* :func:`rlmesh_run`: rlmesh 0.1.0's ``rlmesh.run`` with ``predict_batch``.

The hand loop runs gymnasium's vector env with autoreset disabled and resets
ended lanes with ``reset_mask`` and their next seed, so every episode keeps
its seed (lane ``l`` runs seeds ``l, l + 32, ...``) and the run reports
episodes by seed: the reference the other rows are checked against.
Stable-Baselines3 and rlmesh reset their envs themselves, with no seed: their
envs take the seeds from :class:`_hand_policy.SeedQueue` s instead.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, cast

import _hand_policy as hp
import gymnasium as gym
import numpy as np
from _hand_measure import Meter, Outcome, Sample, by_seed_sample

__all__ = ["async_vector", "plain", "rlmesh_run", "sb3", "vector_loop"]


def vector_loop(venv: Any, episodes_per_lane: int) -> dict[int, Outcome]:
    """Run ``episodes_per_lane`` episodes on every lane of ``venv`` (autoreset disabled).

    One ``act`` (one forward) and one ``step`` per round over all lanes; lanes
    that ended are reset together with ``reset_mask``, each with its next seed.
    Lanes done with their episodes keep being reset and stepped (a vector env
    steps all its lanes) and their results are dropped.
    """
    n = venv.num_envs
    obs, _ = venv.reset(seed=list(range(n)))
    done = np.zeros(n, dtype=np.int64)
    returns = np.zeros(n)
    lengths = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    results: dict[int, Outcome] = {}
    while active.any():
        obs, rewards, terminated, truncated, _ = venv.step(hp.act(obs))
        returns += rewards
        lengths += 1
        ended = (terminated | truncated) & active
        if not ended.any():
            continue
        for lane in np.flatnonzero(ended):
            results[int(done[lane] * n + lane)] = (int(lengths[lane]), float(returns[lane]))
        done[ended] += 1
        returns[ended] = 0.0
        lengths[ended] = 0
        again = ended & (done < episodes_per_lane)
        active &= ~ended | again
        if active.any():
            # Every ended lane is reset (a vector env with autoreset disabled refuses to
            # step one that is not); those done with their episodes get no seed.
            seeds = [int(done[i] * n + i) if again[i] else None for i in range(n)]
            obs, _ = venv.reset(seed=seeds, options={"reset_mask": ended})
    return results


def _vector(mode: str, max_steps: int | None) -> Any:
    kwargs: dict[str, Any] = {} if max_steps is None else {"max_episode_steps": max_steps}
    return gym.make_vec(
        hp.ENV_ID,
        hp.LANES,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
        **kwargs,
    )


def _vector_sample(mode: str, episodes: int, max_steps: int | None) -> Sample:
    """The hand loop over a ``mode`` vector env, timed, its episodes by seed."""
    meter = Meter()
    venv = _vector(mode, max_steps)
    try:
        with meter.timed():
            results = vector_loop(venv, episodes)
        return by_seed_sample(meter, results)
    finally:
        venv.close()


def plain(episodes: int, max_steps: int | None) -> Sample:
    """The reference: the hand loop over a sync vector env, in this process."""
    return _vector_sample("sync", episodes, max_steps)


def async_vector(episodes: int, max_steps: int | None) -> Sample:
    """The hand loop over ``AsyncVectorEnv``: 32 worker processes, the policy here."""
    return _vector_sample("async", episodes, max_steps)


def sb3(episodes: int, max_steps: int | None) -> Sample:
    """``evaluate_policy`` over a 32-env ``DummyVecEnv``; lane ``l`` takes seeds ``l, l+32, ...``.

    ``evaluate_policy`` scores the first ``episodes`` of every lane, so a
    queue per lane gives exactly the reference's seeds (later resets, which
    it does not score, get none).
    """
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv

    meter = Meter()

    def lane(index: int) -> Any:
        queue = hp.SeedQueue(range(index, hp.LANES * episodes, hp.LANES))
        return lambda: hp.QueuedSeeds(hp.make_env(max_steps), queue)

    venv = DummyVecEnv([lane(i) for i in range(hp.LANES)])
    try:
        with meter.timed():
            answer = evaluate_policy(
                hp.SB3Predictor(),
                venv,
                n_eval_episodes=hp.LANES * episodes,
                deterministic=True,
                return_episode_rewards=True,
                warn=False,
            )
        rewards, lengths = cast(tuple[list[float], list[int]], answer)  # return_episode_rewards
        outcomes = [(int(s), float(r)) for s, r in zip(lengths, rewards, strict=True)]
        return meter.sample(outcomes)
    finally:
        venv.close()


def rlmesh_run(episodes: int, max_steps: int | None) -> Sample:
    """``rlmesh.run(model, vector_env, episodes=...)`` with ``predict_batch``.

    rlmesh refuses seeds on a stock vector env (they need autoreset disabled,
    which needs per-lane resets it cannot make there), so it runs the default
    NEXT_STEP autoreset with an episode budget; its budget bounds episode
    starts, so the envs' shared queue hands the scored episodes seeds
    ``0 .. n-1`` (compared with the reference as a multiset).
    """
    os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
    warnings.filterwarnings("ignore")
    import rlmesh

    meter = Meter()
    queue = hp.SeedQueue(hp.seeds_for(episodes))
    kwargs: dict[str, Any] = {} if max_steps is None else {"max_episode_steps": max_steps}
    venv = gym.make_vec(
        hp.ENV_ID,
        hp.LANES,
        vectorization_mode="sync",
        wrappers=[lambda env: hp.QueuedSeeds(env, queue)],
        **kwargs,
    )
    model = hp.rlmesh_model()
    try:
        with meter.timed():
            result = rlmesh.run(model, venv, episodes=hp.LANES * episodes)
        return meter.sample([(int(e.steps), float(e.reward)) for e in result.episodes])
    finally:
        venv.close()
