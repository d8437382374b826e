"""Servers for code that is not Trio: ``start()``, ``wait()``, ``shutdown()`` and ``with``.

Real servers on loopback, real gymnasium envs, routes run with ``rt.run``
from plain (non-Trio) code, as rlmesh 0.1.0's ``EnvServer`` is used.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
from typing import Any

import gymnasium as gym
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

from .._cli import CLI


class _SignalsMidEpisode(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole that sets ``reached`` on its ``at``-th step (a route is mid-episode)."""

    def __init__(self, at: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.at = at
        self.steps = 0
        self.reached = threading.Event()

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == self.at:
            self.reached.set()
        return self.env.step(action)


def test_with_block_serves_an_env_to_rt_run_from_plain_code() -> None:
    with rt.EnvServer(gym.make("CartPole-v1")) as server:
        assert server.address.startswith("127.0.0.1:") and not server.address.endswith(":0")
        assert server.wait(timeout=0) is False  # serving
        report = rt.run(rt.shard(envs=[server.address], model=cartpole_policy, seeds=range(2)))
    assert report.ok and report.total_episodes == 2
    assert server.wait(timeout=0) is True  # stopped on leaving the block
    server.shutdown()  # idempotent
    server.shutdown()


def test_model_and_env_servers_started_and_shut_down_by_hand() -> None:
    model = rt.ModelServer(cartpole_policy).start()
    env = rt.EnvServer(gym.make("CartPole-v1"))
    assert env.start() is env
    try:
        report = rt.run(rt.shard(envs=[env.address], model=model.address, seeds=range(3)))
        assert report.ok and report.total_episodes == 3
    finally:
        env.shutdown()
        model.shutdown()
    assert env.wait() and model.wait()
    model.shutdown()  # idempotent after stopping


def test_wait_on_a_server_never_started_is_refused_as_rlmesh_does() -> None:
    # Issue 22 (rlmesh 0.1.0's lifecycle): wait() before start() raises, bad timeouts
    # raise ValueError, and shutdown() before start() still closes the env.
    env = gym.make("CartPole-v1")
    closed: list[bool] = []
    env.close = lambda: closed.append(True)  # type: ignore[method-assign]
    server = rt.EnvServer(env)
    with pytest.raises(RuntimeError, match=r"wait\(\) called before start\(\)"):
        server.wait()
    for bad in (-1, math.nan, math.inf):
        with pytest.raises(ValueError, match="non-negative finite"):
            server.wait(bad)
    server.shutdown()
    assert closed == [True]


def test_start_twice_is_refused() -> None:
    with rt.ModelServer(cartpole_policy) as server, pytest.raises(RuntimeError, match="already"):
        server.start()


def test_start_on_a_taken_port_raises_the_bind_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = rt.EnvServer(gym.make("CartPole-v1"), f"127.0.0.1:{port}")
        with pytest.raises(OSError):
            server.start()
        assert server.wait(timeout=0) is True


def test_async_policy_is_served_from_plain_code() -> None:
    async def policy(obs: Any) -> int:
        return cartpole_policy(obs)

    with rt.ModelServer(policy) as model, rt.EnvServer(gym.make("CartPole-v1")) as env:
        report = rt.run(rt.shard(envs=[env.address], model=model.address, seeds=range(2)))
    assert report.ok and report.total_episodes == 2


@pytest.mark.parametrize("env_thread", ["loop", "worker"])
def test_shutdown_while_a_route_is_mid_episode_fails_it_cleanly(env_thread: str) -> None:
    env = _SignalsMidEpisode(at=5)
    server = rt.EnvServer(env, env_thread=env_thread).start()
    reports: list[Any] = []
    routes = rt.shard(envs=[server.address], model=cartpole_policy, seeds=range(10_000))

    def run_routes() -> None:
        try:
            reports.append(rt.run(routes))
        except rt.RunFailed as failed:  # the route failed: the run says so, report attached
            reports.append(failed.report)

    runner = threading.Thread(target=run_routes)
    runner.start()
    try:
        assert env.reached.wait(60), "the route never reached its fifth step"
        server.shutdown()
        assert server.wait(timeout=0)
    finally:
        runner.join(60)
    assert not runner.is_alive(), "the route did not end after the server shut down"
    (outcome,) = reports[0].routes
    assert outcome.status == "failed"
    assert isinstance(outcome.error, rt.EnvRpcError), outcome.error


def test_model_shutdown_while_a_route_is_joined_fails_it_cleanly() -> None:
    reached = threading.Event()
    calls = 0

    def policy(obs: Any) -> int:
        nonlocal calls
        calls += 1
        if calls == 5:
            reached.set()
        return cartpole_policy(obs)

    model = rt.ModelServer(policy).start()
    reports: list[Any] = []
    with rt.EnvServer(gym.make("CartPole-v1")) as env:
        routes = rt.shard(envs=[env.address], model=model.address, seeds=range(10_000))

        def run_routes() -> None:
            try:
                reports.append(rt.run(routes))
            except rt.RunFailed as failed:
                reports.append(failed.report)

        runner = threading.Thread(target=run_routes)
        runner.start()
        try:
            assert reached.wait(60), "the route never reached its fifth predict"
            model.shutdown()
        finally:
            runner.join(60)
    assert not runner.is_alive(), "the route did not end after the model server shut down"
    (outcome,) = reports[0].routes
    assert outcome.status == "failed"
    assert isinstance(outcome.error, rt.ModelRpcError), outcome.error


async def test_server_run_in_a_plain_trio_nursery_needs_no_asyncio_loop() -> None:
    # No bridge loop is opened here: the server runs on a thread of its own.
    server = rt.EnvServer(gym.make("CartPole-v1"))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        routes = rt.shard(envs=[server.address], model=cartpole_policy, seeds=range(2))
        report = await rt.run_routes(routes)
        nursery.cancel_scope.cancel()
    assert report.ok and report.total_episodes == 2


def _first_serving_line(*args: str) -> str:
    proc = subprocess.Popen(
        [*CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("serving "):
                return line.rstrip("\n")
        raise AssertionError(f"no serving line; exit {proc.wait()}")
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (("serve-env", "CartPole-v1"), "CartPole-v1"),
        (
            ("serve-model", "rlmesh_trio.inprocess._demo_policy:cartpole_policy"),
            "rlmesh_trio.inprocess._demo_policy:cartpole_policy",
        ),
    ],
)
def test_cli_servers_say_where_they_serve_once_bound(args: tuple[str, ...], label: str) -> None:
    line = _first_serving_line(*args)
    prefix = f"serving {label} on 127.0.0.1:"
    assert line.startswith(prefix) and line.endswith(" (Ctrl+C to stop)"), line
    port = line[len(prefix) :].split(" ", 1)[0]
    assert port.isdigit() and port != "0"


def test_cli_serving_line_goes_to_stderr_not_stdout() -> None:
    proc = subprocess.Popen(
        [*CLI, "serve-env", "CartPole-v1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("serving "):
                break
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "serving" not in out
    assert sys.executable  # the CLI ran under this interpreter
