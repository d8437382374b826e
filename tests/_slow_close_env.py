"""A CartPole whose close() hangs, announcing each step of its life on stderr (for the
two-Ctrl+C test: the test waits on these lines, not on the clock)."""

from __future__ import annotations

import sys
import threading
from typing import Any

import gymnasium as gym


class SlowClose(gym.Wrapper[Any, Any, Any, Any]):
    """``reset`` prints "env: reset N"; ``close`` prints "env: closing", then hangs."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.resets = 0

    def reset(self, **kwargs: Any) -> Any:
        self.resets += 1
        print(f"env: reset {self.resets}", file=sys.stderr, flush=True)
        return super().reset(**kwargs)

    def close(self) -> None:
        print("env: closing", file=sys.stderr, flush=True)
        threading.Event().wait(120)  # a close that hangs (the test never lets it end)
        super().close()


def make() -> SlowClose:
    return SlowClose()
