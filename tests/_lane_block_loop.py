"""A minimal lane-block driver loop for tests, and the plain gymnasium loop it must equal.

``drive_block`` resets every lane, then per round predicts once for every
running lane, steps them with one ``step_lanes`` call and resets the ended
lanes with the next seeds: what the runtime's block mode does, minus hooks.
Each finished episode is checked against the env's own ``EpisodeMetadata``
where the block reports it (``episodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

Policy = Callable[[np.ndarray], np.ndarray]
Episode = tuple[int, int, float]  # (seed, steps, return)


def angle_policy(rows: np.ndarray) -> np.ndarray:
    """CartPole: push toward the pole's lean (lengths vary with the seed)."""
    return (np.asarray(rows)[:, 2] > 0).astype(np.int64)


async def drive_block(
    env: Any, seeds: Sequence[int], policy: Policy, timeout: float = 30.0
) -> list[Episode]:
    """Run one episode per seed over ``env``'s lanes (a LaneBlockEnv); in seed order."""
    queue = list(seeds)
    n = min(env.num_lanes, len(queue))
    lane_seed = np.array(queue[:n], dtype=np.int64)
    del queue[:n]
    running = np.arange(n)
    reset = await env.reset_lanes(running, [int(s) for s in lane_seed], [None] * n, timeout)
    obs = np.array(reset.observations)
    steps = np.zeros(n, dtype=np.int64)
    returns = np.zeros(n, dtype=np.float64)
    done: list[Episode] = []
    while running.size:
        result = await env.step_lanes(running, policy(obs[running]), timeout)
        steps[running] += 1
        returns[running] += result.rewards
        obs[running] = result.observations
        ended = running[result.terminated | result.truncated]
        _check_metadata(result, ended, lane_seed, steps, returns)
        for lane in ended.tolist():
            done.append((int(lane_seed[lane]), int(steps[lane]), float(returns[lane])))
        fresh = ended[: len(queue)]
        if fresh.size:
            lane_seed[fresh] = queue[: fresh.size]
            del queue[: fresh.size]
            steps[fresh] = 0
            returns[fresh] = 0.0
            again = await env.reset_lanes(
                fresh, [int(s) for s in lane_seed[fresh]], [None] * fresh.size, timeout
            )
            obs[fresh] = again.observations
        running = np.setdiff1d(running, ended[fresh.size :])
    order = {seed: k for k, seed in enumerate(seeds)}
    return sorted(done, key=lambda e: order[e[0]])


def _check_metadata(
    result: Any, ended: np.ndarray, seeds: np.ndarray, steps: np.ndarray, returns: np.ndarray
) -> None:
    metas = {m.env_index: m for m in getattr(result, "episodes", ()) if m.final_info is not None}
    if not metas:
        return
    for lane in ended.tolist():
        meta = metas[lane]
        assert (meta.seed, meta.step_count) == (seeds[lane], steps[lane]), (lane, meta)
        assert meta.cumulative_reward == returns[lane]
        assert lane in result.final_infos


def plain_episodes(env_id: str, seeds: Sequence[int], policy: Policy) -> list[Episode]:
    """The same episodes with one gymnasium env, one seed at a time."""
    out: list[Episode] = []
    for seed in seeds:
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed)
        steps, total, over = 0, 0.0, False
        while not over:
            action = int(policy(np.asarray(obs)[None])[0])
            obs, reward, terminated, truncated, _ = env.step(action)
            steps += 1
            total += float(reward)
            over = terminated or truncated
        env.close()
        out.append((seed, steps, total))
    return out
