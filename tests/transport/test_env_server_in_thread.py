"""serve_env / serve_model run their server on a dedicated thread: lifetime, errors, stopping."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

import gymnasium as gym
import pytest
import trio
from grpclib.exceptions import GRPCError, StreamTerminatedError

import rlmesh_trio as rt
from rlmesh_trio import serve_env, serve_model
from rlmesh_trio._protocol import core_pb, env_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

from .._asyncio_bridge import asyncio_loop
from .._env_raw_client import RawJoin, handshake, unary
from .._envhost_envs import CountingEnv
from .._waits import threads_ended

SERVER_THREADS = ("rlmesh-trio-env-server", "rlmesh-trio-model-server")


def server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name in SERVER_THREADS]


async def no_server_thread_left() -> bool:
    # The thread signals "finished" as its last statement; join it (up to a second).
    return await threads_ended(SERVER_THREADS, 1.0)


class ThreadRecorder(gym.Wrapper[Any, Any, Any, Any]):
    """Records the thread each env call runs on."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.threads: set[str] = set()
        self.closed_on: str | None = None

    def reset(self, **kwargs: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return self.env.step(action)

    def close(self) -> None:
        self.closed_on = threading.current_thread().name
        self.env.close()


def cartpole() -> ThreadRecorder:
    return ThreadRecorder(gym.make("CartPole-v1"))


def route(env: str, model: Any) -> rt.Route:
    return rt.Route(env=env, model=model, seeds=[0, 1], max_episode_steps=20)


async def test_single_env_runs_on_the_server_thread_which_is_gone_after() -> None:
    env = cartpole()
    async with serve_env(env) as server:
        assert server_threads() == ["rlmesh-trio-env-server"]
        report = await rt.run_routes([route(server.address, cartpole_policy)])
        assert report.ok and report.total_steps > 0
        assert server.contract.spec.id == "CartPole-v1"
    # env_thread="auto" with one env: calls (and close) inline on the server's thread.
    assert env.threads == {"rlmesh-trio-env-server"}
    assert env.closed_on == "rlmesh-trio-env-server"
    assert server.shutdown_reason is None  # an owner's stop records no reason
    assert await no_server_thread_left()


async def test_lanes_run_on_worker_threads() -> None:
    lanes = [cartpole(), cartpole()]
    async with serve_env(lanes) as server:
        report = await rt.run_routes([route(server.address, cartpole_policy)])
        assert report.ok
    used = set().union(*(lane.threads for lane in lanes))
    assert used and all(name.startswith("rlmesh-trio-env-") for name in used)
    assert "rlmesh-trio-env-server" not in used
    assert await no_server_thread_left()


async def test_policy_runs_on_the_model_server_thread() -> None:
    seen: set[str] = set()

    def policy(obs: Any) -> int:
        seen.add(threading.current_thread().name)
        return cartpole_policy(obs)

    async with serve_model(policy) as model, serve_env(cartpole()) as env:
        report = await rt.run_routes([route(env.address, model.address)])
        assert report.ok
    assert seen == {"rlmesh-trio-model-server"}
    assert await no_server_thread_left()


async def test_async_policy_runs_in_the_server_threads_own_trio_run() -> None:
    seen: set[str] = set()

    async def policy(obs: Any) -> int:
        await trio.sleep(0)
        seen.add(threading.current_thread().name)
        return cartpole_policy(obs)

    async with serve_model(policy) as model, serve_env(cartpole()) as env:
        report = await rt.run_routes([route(env.address, model.address)])
        assert report.ok
    assert seen == {"rlmesh-trio-model-server"}
    assert await no_server_thread_left()


@contextmanager
def taken_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


async def _slow_zero(obs: Any) -> int:
    return 0


SERVERS: dict[str, Callable[[str], AbstractAsyncContextManager[Any]]] = {
    "env": lambda address: serve_env(CountingEnv(), address),
    "env-worker": lambda address: serve_env(CountingEnv(), address, env_thread="worker"),
    "lanes": lambda address: serve_env([CountingEnv(), CountingEnv()], address),
    "model": lambda address: serve_model(cartpole_policy, address),
    "model-threaded": lambda address: serve_model(cartpole_policy, address, threaded=True),
    "model-async": lambda address: serve_model(_slow_zero, address),
}


@pytest.mark.parametrize("kind", sorted(SERVERS))
async def test_a_taken_port_raises_oserror_from_the_async_with(kind: str) -> None:
    with taken_port() as port:
        with pytest.raises(OSError):
            async with SERVERS[kind](f"127.0.0.1:{port}"):
                raise AssertionError("the body must not run")
    assert await no_server_thread_left()


async def test_bad_address_and_unservable_env_raise_before_any_thread() -> None:
    with pytest.raises(rt.InvalidSpec):
        async with serve_env(CountingEnv(), "bogus::addr"):
            raise AssertionError("unreachable")
    with pytest.raises(TypeError, match=r"env must be a gymnasium Env.*got object"):
        async with serve_env(object()):
            raise AssertionError("unreachable")
    with pytest.raises(ValueError, match="caller"):
        async with serve_env(CountingEnv(), env_thread="caller"):
            raise AssertionError("unreachable")
    with pytest.raises(ValueError, match="env_thread"):
        async with serve_env(CountingEnv(), env_thread="elsewhere"):
            raise AssertionError("unreachable")
    assert server_threads() == []


@pytest.mark.parametrize("kind", sorted(SERVERS))
async def test_cancelled_while_starting_stops_the_thread(kind: str) -> None:
    entered = False
    with trio.CancelScope() as scope:
        scope.cancel()
        async with SERVERS[kind]("127.0.0.1:0"):
            entered = True
    assert scope.cancelled_caught and not entered
    assert await no_server_thread_left()


async def test_cancelling_the_body_stops_the_server() -> None:
    env = CountingEnv(done_at=99)
    address = None
    with trio.move_on_after(0.2) as scope:
        async with serve_env(env) as server:
            address = server.address
            join = RawJoin(address)
            await join.open()
            await join.rpc(reset=env_pb.ResetRequest())
            await trio.sleep_forever()
    assert scope.cancelled_caught and address is not None
    assert env.closed
    assert await no_server_thread_left()
    async with asyncio_loop():
        with pytest.raises((GRPCError, StreamTerminatedError, ConnectionError, OSError)):
            await handshake(address)


async def test_remote_shutdown_ends_the_thread_while_the_body_runs_on() -> None:
    request = env_pb.ShutdownRequest(base=core_pb.ShutdownRequest(reason="owner shutdown"))
    env = CountingEnv()
    async with serve_env(env, allow_remote_shutdown=True) as server:
        reply = await unary(server.address, "Shutdown", request, env_pb.ShutdownResponse)
        assert reply.base.accepted
        assert await no_server_thread_left()  # stopped by itself; the body is still here
        assert server.shutdown_reason == "owner shutdown" and env.closed
    assert server.shutdown_reason == "owner shutdown"


async def test_many_servers_start_and_stop_together() -> None:
    addresses: list[str] = []
    async with (
        serve_model(cartpole_policy) as model,
        serve_env(cartpole()) as a,
        serve_env(cartpole()) as b,
        serve_env(cartpole()) as c,
    ):
        addresses = [a.address, b.address, c.address]
        report = await rt.run_routes([route(x, model.address) for x in addresses])
        assert report.ok and len(report.routes) == 3
        assert sorted(server_threads()) == ["rlmesh-trio-env-server"] * 3 + [
            "rlmesh-trio-model-server"
        ]
    assert await no_server_thread_left()
