"""A deterministic CartPole policy with short episodes (tens of steps), for the durable-run tests.

It pushes toward the side the pole leans to, without lookahead, so episodes
end in tens of steps and a few hundred of them stay quick. Importable by a
runner subprocess as ``tests._durable_policy:angle_policy``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["angle_policy", "gymnasium_episode"]


def angle_policy(obs: Any) -> int:
    return 1 if float(obs[2]) > 0.0 else 0


def gymnasium_episode(seed: int) -> tuple[int, int, float, bool, bool]:
    """The episode gymnasium itself runs: (seed, steps, reward, terminated, truncated)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    steps, reward = 0, 0.0
    try:
        while True:
            obs, r, terminated, truncated, _ = env.step(angle_policy(np.asarray(obs)))
            steps += 1
            reward += float(r)
            if terminated or truncated:
                return seed, steps, reward, bool(terminated), bool(truncated)
    finally:
        env.close()
