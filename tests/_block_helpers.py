"""What the block-mode and fused-route tests share: a failing env wrapper."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class Breaks(gym.Wrapper[Any, Any, Any, Any]):
    """Raises ``RuntimeError(message)`` on its ``after``-th step (counted over all its
    episodes) when ``armed`` (a resumed run's envs are made unarmed)."""

    def __init__(
        self, env: gym.Env[Any, Any], after: int, message: str = "env broke", armed: bool = True
    ) -> None:
        super().__init__(env)
        self.after = after
        self.message = message
        self.armed = armed
        self.count = 0

    def step(self, action: Any) -> Any:
        self.count += 1
        if self.armed and self.count >= self.after:
            raise RuntimeError(self.message)
        return self.env.step(action)
