"""A one-lane VectorEnv seen as a single env (0.1.0 serves it as a lane endpoint, §3.0)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from ._legacy import DuckVector
from ._values import lane_info

__all__ = ["SingleLane"]


class SingleLane:
    """Drops the batch axis of a ``num_envs == 1`` VectorEnv."""

    def __init__(self, env: gym.vector.VectorEnv[Any, Any, Any] | DuckVector) -> None:
        self._env = env
        self.action_space: gym.Space[Any] = env.single_action_space
        self.observation_space: gym.Space[Any] = env.single_observation_space
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.metadata.pop("autoreset_mode", None)
        self.spec = getattr(env, "spec", None)
        self.render_mode = getattr(env, "render_mode", None)

    def _first(self, batched: Any) -> Any:
        return next(iter(iterate(self._env.observation_space, batched)))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self._env.reset(seed=seed, options=options)
        return self._first(obs), lane_info(info, 0)

    def step(self, action: Any) -> Any:
        out: Any = create_empty_array(self.action_space, n=1)
        batch = concatenate(self.action_space, [action], out)
        obs, reward, terminated, truncated, info = self._env.step(batch)
        return (
            self._first(obs),
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            lane_info(info, 0),
        )

    def render(self) -> Any:
        frames: Any = self._env.render()
        if isinstance(frames, tuple | list):
            return frames[0] if frames else None
        return frames

    def close(self) -> None:
        self._env.close()
