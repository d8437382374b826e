"""A CartPole that says "env: reset N" on stderr at each reset, so a test can wait for
episodes to be under way (on these lines, not on the clock)."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym


class ResetMarks(gym.Wrapper[Any, Any, Any, Any]):
    """``reset`` prints "env: reset N" (N counts this env's resets)."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.resets = 0

    def reset(self, **kwargs: Any) -> Any:
        self.resets += 1
        print(f"env: reset {self.resets}", file=sys.stderr, flush=True)
        return super().reset(**kwargs)


def make() -> ResetMarks:
    return ResetMarks()
