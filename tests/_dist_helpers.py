"""Shared pieces of the distributed tests: routes that pickle, a reference run, a killer."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import gymnasium

import rlmesh_trio as rt
from rlmesh_trio.distributed import ProcessBackend, ShardHandle, ShardWork
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.testing import READY_FD, ServerProcess, spawn_server

make_cartpole = functools.partial(gymnasium.make, "CartPole-v1")


def inprocess_routes(count: int, per_route: int, **options: Any) -> list[rt.Route]:
    """``count`` in-process CartPole routes (env factory + policy: both pickle)."""
    return [
        rt.Route(
            env=make_cartpole,
            model=cartpole_policy,
            seeds=range(i * per_route, (i + 1) * per_route),
            route_id=f"r{i}",
            **options,
        )
        for i in range(count)
    ]


def episode_keys(report: rt.RunReport) -> list[tuple[str, int, int | None, int, float]]:
    return [
        (o.route_id, e.index, e.seed, e.steps, e.reward) for o in report.routes for e in o.episodes
    ]


def gymnasium_episode(seed: int) -> tuple[int, float]:
    """(steps, reward) of one CartPole episode under the demo policy, run by gymnasium alone."""
    env = make_cartpole()
    obs, _ = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(cartpole_policy(obs))
        steps += 1
        total += float(reward)
        if terminated or truncated:
            return steps, total


def serve_env_process() -> ServerProcess:
    argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", "CartPole-v1"]
    return spawn_server([*argv, "--ready-fd", READY_FD], what="our CartPole server")


class KillingProcessBackend(ProcessBackend):
    """Processes whose first attempt is SIGKILLed once it has streamed ``after`` batches."""

    def __init__(self, after: int = 1) -> None:
        super().__init__()
        self.after = after
        self.killed: list[int] = []

    def start(self, work: ShardWork) -> ShardHandle:
        handle = super().start(work)
        if work.attempt > 1:
            return handle
        return _Killing(handle, self.after, self.killed)


class _Killing:
    def __init__(self, handle: Any, after: int, killed: list[int]) -> None:
        self._handle, self._after, self._killed = handle, after, killed

    def batches(self) -> Iterator[list[Any]]:
        for n, batch in enumerate(self._handle.batches(), 1):
            yield batch
            if n == self._after and self._handle.pid is not None:
                os.kill(self._handle.pid, signal.SIGKILL)
                self._killed.append(self._handle.pid)

    def cancel(self, reason: str) -> None:
        self._handle.cancel(reason)
