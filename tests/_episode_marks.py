"""An env factory that signals its first finished episode, for CLI tests that interrupt a run.

Imported by an ``rlmesh-trio serve-env`` subprocess
(``tests._episode_marks:cartpole_signalling_first_episode``). When the env is
reset the second time -- the runtime only asks for that after it has recorded
the first episode -- it writes one byte to the FIFO named by
``$RLMESH_TEST_EPISODE_FIFO``, whose reading end the test holds open.
"""

from __future__ import annotations

import os
import select
from pathlib import Path
from typing import Any

import gymnasium

__all__ = ["cartpole_signalling_first_episode", "open_episode_fifo", "wait_for_episode"]

FIFO_VARIABLE = "RLMESH_TEST_EPISODE_FIFO"


class _SignalFirstEpisode(gymnasium.Wrapper[Any, Any, Any, Any]):
    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.resets = 0

    def reset(self, **kwargs: Any) -> Any:
        self.resets += 1
        if self.resets == 2:
            fd = os.open(os.environ[FIFO_VARIABLE], os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)
        return self.env.reset(**kwargs)


def cartpole_signalling_first_episode() -> gymnasium.Env[Any, Any]:
    """``CartPole-v1`` that signals the FIFO when its first episode is over."""
    return _SignalFirstEpisode(gymnasium.make("CartPole-v1"))


def open_episode_fifo(path: Path) -> int:
    """Make the FIFO and open its reading end (non-blocking), before the server starts."""
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def wait_for_episode(fd: int, timeout: float) -> bool:
    """Wait until the env has signalled (``False`` if ``timeout`` seconds pass first)."""
    readable, _, _ = select.select([fd], [], [], timeout)
    return bool(readable) and os.read(fd, 1) == b"1"
