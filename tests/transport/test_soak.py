"""Soak: 200 short runs in one process must not leak fds, threads, Trio tasks or memory.

Two env servers and a model server run on loopback for the whole test (in the
test's own Trio run); each run mixes routes over them with in-process
endpoints. Resources are sampled after each of the first ten and the last ten
runs: open file descriptors (``/proc/self/fd``), threads
(``threading.active_count``), Trio tasks (walked from the root task), and RSS
(``/proc/self/statm``).
"""

from __future__ import annotations

import gc
import os
import socket
import statistics
import sys
import threading
from typing import Any

import gymnasium
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import CARTPOLE_POLICY, cartpole_policy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self"),
]

RUNS = 200
WINDOW = 10
LIMITS = rt.Limits(service_close_timeout=2.0)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def trio_tasks() -> int:
    """Every task of the current Trio run, walked from the root task."""
    count = 0
    root = trio.lowlevel.current_root_task()
    assert root is not None
    pending = [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


def sample() -> dict[str, int]:
    gc.collect()
    return {
        "fds": open_fds(),
        "threads": threading.active_count(),
        "tasks": trio_tasks(),
        "rss": rss_bytes(),
    }


def cartpole() -> gymnasium.Env[Any, Any]:
    return gymnasium.make("CartPole-v1")


def routes_for(run: int, env_a: str, env_b: str, model: str) -> list[rt.Route]:
    """Four routes: served env + served model, served env + local policy, local env + served
    model, local env + local policy; seeds move with the run number."""
    common: dict[str, Any] = {"max_episode_steps": 5, "limits": LIMITS}
    return [
        rt.Route(env=env_a, model=model, seeds=[run], route_id="served", **common),
        rt.Route(env=env_b, model=cartpole_policy, seeds=[run + 1], route_id="env-only", **common),
        rt.Route(env=cartpole, model=model, seeds=[run + 2], route_id="model-only", **common),
        rt.Route(env=cartpole, model=cartpole_policy, seeds=[run + 3], route_id="local", **common),
    ]


async def test_two_hundred_runs_leak_nothing() -> None:
    first: list[dict[str, int]] = []
    last: list[dict[str, int]] = []
    async with (
        rt.serve_env(cartpole(), "127.0.0.1:0") as env_a,
        rt.serve_env(cartpole(), "127.0.0.1:0") as env_b,
        rt.serve_model(CARTPOLE_POLICY, "127.0.0.1:0") as model,
    ):
        for run in range(RUNS):
            report = await rt.run_routes(
                routes_for(run, env_a.address, env_b.address, model.address)
            )
            assert report.ok and report.total_episodes == 4
            assert [ep.seed for ep in report.episodes] == [run, run + 1, run + 2, run + 3]
            if run < WINDOW:
                first.append(sample())
            elif run >= RUNS - WINDOW:
                last.append(sample())
    summary = {key: (max(s[key] for s in first), max(s[key] for s in last)) for key in first[0]}
    print(f"soak, max over the first and the last {WINDOW} runs: {summary}")
    for key in ("fds", "tasks", "threads"):
        before, after = summary[key]
        assert after <= before, f"{key} grew from {before} to {after} over {RUNS} runs"
    rss_first = statistics.mean(s["rss"] for s in first)
    rss_last = statistics.mean(s["rss"] for s in last)
    growth = rss_last / rss_first - 1.0
    print(f"soak RSS: {rss_first / 2**20:.1f} MiB -> {rss_last / 2**20:.1f} MiB ({growth:+.1%})")
    assert growth < 0.10, f"RSS grew {growth:.1%} over {RUNS} runs"


@pytest.mark.parametrize("side", ["env", "model"])
async def test_served_connections_get_tcp_nodelay(side: str) -> None:
    serving: Any = (
        rt.serve_env(cartpole(), "127.0.0.1:0")
        if side == "env"
        else rt.serve_model(cartpole_policy, "127.0.0.1:0")
    )
    async with serving as server:
        # Accepted sockets inherit the listener's proto; grpclib sets TCP_NODELAY on an
        # accepted socket only when that proto is IPPROTO_TCP.
        listeners = [server._listener.sock]  # our own listening socket, handed to grpclib
        assert listeners
        assert all(sock.proto == socket.IPPROTO_TCP for sock in listeners)
