"""Envs rlmesh 0.1.0 serves that are not plain gymnasium: the legacy gym API and a
duck-typed vector env with no batch spaces (issue 12 item 29)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np


class LegacyCartPole:
    """CartPole behind the old gym API: ``reset(seed=None)`` -> obs (no options, no
    info), 4-tuple steps; ``OldestCartPole`` also has no ``seed`` keyword, only ``seed()``.

    A time limit of ``limit`` steps sets ``info["TimeLimit.truncated"]``, as gym's
    TimeLimit wrapper did.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, limit: int = 500) -> None:
        self._env = gym.make("CartPole-v1", max_episode_steps=10_000).unwrapped
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space
        self.limit = limit
        self._seed: int | None = None
        self._t = 0

    def seed(self, seed: int | None = None) -> list[int | None]:
        self._seed = seed
        return [seed]

    def reset(self, seed: int | None = None) -> Any:
        self._t = 0
        obs, _ = self._env.reset(seed=self._seed if seed is None else seed)
        self._seed = None
        return obs

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        obs, reward, terminated, _truncated, _info = self._env.step(int(action))
        self._t += 1
        info: dict[str, Any] = {}
        done = bool(terminated)
        if self._t >= self.limit and not done:
            info["TimeLimit.truncated"] = True
            done = True
        return obs, float(reward), done, info

    def close(self) -> None:
        self._env.close()


class OldestCartPole(LegacyCartPole):
    """gym before 0.22: ``reset()`` takes nothing; seeding is ``env.seed(seed)``."""

    def reset(self) -> Any:  # type: ignore[override]
        return super().reset()


class PoolStyleVector:
    """N CartPoles with ``num_envs`` and single spaces only (EnvPool style): no batch
    ``action_space``. NEXT_STEP autoreset, gymnasium's 5-tuple unless ``legacy``."""

    def __init__(self, n: int = 2, *, legacy: bool = False, seed: int = 11) -> None:
        self._inner = gym.vector.SyncVectorEnv(
            [lambda: gym.make("CartPole-v1") for _ in range(n)],
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
        self._inner.reset(seed=seed)  # later unseeded resets continue from here
        self.num_envs = n
        self.single_observation_space = self._inner.single_observation_space
        self.single_action_space = self._inner.single_action_space
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.legacy = legacy

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        obs, info = self._inner.reset(seed=seed, options=options)
        return obs if self.legacy else (obs, info)

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, info = self._inner.step(np.asarray(actions))
        if not self.legacy:
            return obs, rewards, terminated, truncated, info
        # gym 0.24-0.25 vector style: a dict of arrays, the time limit as a lane flag.
        infos = dict(info, **{"TimeLimit.truncated": truncated, "_TimeLimit.truncated": truncated})
        return obs, rewards, terminated | truncated, infos

    def close(self) -> None:
        self._inner.close()
