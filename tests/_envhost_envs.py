"""Small gymnasium envs for the env host, LocalEnv and env server tests."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np


class Gate(threading.Event):
    """A ``CountingEnv.gate`` that also says when a step has reached it (in its worker
    thread), so a test can wait for "the env call is running" instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.reached = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.reached.set()
        return super().wait(timeout)


class CountingEnv(gym.Env[np.ndarray, int]):
    """Discrete(3) actions, reward = action + 0.5, terminates after ``done_at`` steps."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(3)
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, done_at: int = 2, render_mode: str | None = None) -> None:
        self.done_at = done_at
        self.render_mode = render_mode
        self.t = 0
        self.closed = False
        self.step_delay = 0.0
        self.gate: threading.Event | None = None
        self.fail_with: BaseException | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        if options and options.get("sleep"):
            time.sleep(float(options["sleep"]))  # a slow reset, asked for by the test
        return np.array([0.0], np.float32), {"seed": seed, "options": options}

    def step(self, action: Any) -> Any:
        if self.gate is not None:
            self.gate.wait(10)
        if self.step_delay:
            time.sleep(self.step_delay)  # a slow step is what the test measures
        if self.fail_with is not None:
            raise self.fail_with
        self.t += 1
        done = self.t >= self.done_at
        info: dict[str, Any] = {"t": self.t}
        if done:
            info["is_success"] = True
        return np.array([float(self.t)], np.float32), float(action) + 0.5, done, False, info

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return np.full((2, 3, 3), 7, np.uint8)
        return None

    def close(self) -> None:
        self.closed = True


class RichEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """Dict observation (with Text) and Dict action, declared out of key order."""

    observation_space = gym.spaces.Dict(
        {
            "zpos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "text": gym.spaces.Text(max_length=16),
            "count": gym.spaces.Discrete(100),
        }
    )
    action_space = gym.spaces.Dict(
        {"move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "say": gym.spaces.Text(8)}
    )

    def __init__(self) -> None:
        self.t = 0
        self.last_action: Any = None

    def _obs(self, text: str) -> dict[str, Any]:
        return {"zpos": np.array([0.5, -0.5], np.float32), "text": text, "count": self.t}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs("héllo"), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        self.last_action = action
        return self._obs(str(action["say"])), 1.0, self.t >= 3, False, {}


class TextEnv(gym.Env[str, str]):
    """Text in, text out: echoes the action upper-cased."""

    observation_space = gym.spaces.Text(max_length=32)
    action_space = gym.spaces.Text(max_length=32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return "start", {}

    def step(self, action: Any) -> Any:
        return str(action).upper(), float(len(action)), action == "bye", False, {}


class BoxActionEnv(gym.Env[np.ndarray, np.ndarray]):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(1, np.float32), float(np.sum(action)), False, False, {}
