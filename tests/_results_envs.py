"""Small real gymnasium envs for the results tests: image observations, a render that breaks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class PixelEnv(gym.Env[np.ndarray, int]):
    """Observations are 16x24 RGB images (a bar moving right); episodes last ``length`` steps."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium's own class attribute

    def __init__(self, length: int = 6) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (16, 24, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.length = length
        self.t = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros((16, 24, 3), np.uint8)
        frame[:, self.t % 24] = (255, 128, 0)
        return frame

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return self._frame(), 1.0 + action, self.t >= self.length, False, {}


class BrokenRender(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose render() raises from its ``fail_at``-th call on (then works again)."""

    def __init__(self, env: gym.Env[Any, Any], fail_at: int, failures: int = 1) -> None:
        super().__init__(env)
        self.calls = 0
        self.fail_at = fail_at
        self.failures = failures

    def render(self) -> Any:
        self.calls += 1
        if self.fail_at <= self.calls < self.fail_at + self.failures:
            raise RuntimeError("render blew up")
        return self.env.render()


def lean_policy(obs: Any) -> int:
    """Deterministic CartPole policy: push toward the pole's lean."""
    return int(np.asarray(obs).reshape(-1)[2] > 0)


def first_action(obs: Any) -> int:
    return 0
