"""Env factories and policies that stall on purpose, for `rlmesh-trio serve-env/serve-model`.

They are imported by server subprocesses (``tests._faults_targets:slow_cartpole``),
so their knobs come from environment variables set by the test:

* ``FAULTS_STALL_AT``: the 1-based call (env step or policy call) that stalls
  (default 30);
* ``FAULTS_STALL_MARK``: a file created when the stall begins, so a test can
  wait for it instead of guessing;
* stalls last an hour; the tests kill the server process (SIGKILL) afterwards.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import gymnasium
import trio

from rlmesh_trio.inprocess._demo_policy import cartpole_policy

__all__ = ["STALL_SECONDS", "slow_cartpole", "stalling_policy"]

STALL_SECONDS = 3600.0


def _stall_at() -> int:
    return int(os.environ.get("FAULTS_STALL_AT", "30"))


def _mark_stall() -> None:
    mark = os.environ.get("FAULTS_STALL_MARK")
    if mark:
        Path(mark).touch()


class _StallingStep(gymnasium.Wrapper[Any, Any, Any, Any]):
    """CartPole whose ``FAULTS_STALL_AT``-th step (counted over the env's life) never returns."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.calls = 0
        self.stall_at = _stall_at()

    def step(self, action: Any) -> Any:
        self.calls += 1
        if self.calls == self.stall_at:
            _mark_stall()
            # The stall is the fault under test (in the server's worker thread).
            time.sleep(STALL_SECONDS)
        return self.env.step(action)


def slow_cartpole() -> gymnasium.Env[Any, Any]:
    """``CartPole-v1`` that stalls at step ``FAULTS_STALL_AT``."""
    return _StallingStep(gymnasium.make("CartPole-v1"))


class _StallingPolicy:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, obs: Any) -> int:
        self.calls += 1
        if self.calls == _stall_at():
            _mark_stall()
            await trio.sleep(STALL_SECONDS)  # the stall is the fault under test
        return cartpole_policy(obs)


#: An async CartPole policy whose ``FAULTS_STALL_AT``-th call never returns.
stalling_policy = _StallingPolicy()
