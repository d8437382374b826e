"""The Trio-native client: reuse across runs, render, non-gRPC peers, keepalive."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium as gym
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio._protocol import WORKFLOW_EDITION, env_pb, spaces_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

from .._cli import run_cli


@contextmanager
def http1_server() -> Iterator[str]:
    """A plain HTTP/1 server on 127.0.0.1:0 in a thread (it speaks no HTTP/2)."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_remote_env_handle_serves_run_after_run() -> None:
    async with rt.serve_env(gym.make("CartPole-v1")) as server:
        env = rt.RemoteEnv(server.address)
        try:
            first = await rt.run_routes([rt.Route(env=env, model=cartpole_policy, episodes=2)])
            second = await rt.run_routes([rt.Route(env=env, model=cartpole_policy, episodes=2)])
        finally:
            await env.aclose()
    assert first.ok and second.ok, (first, second)
    assert first.total_episodes == second.total_episodes == 2


async def test_render_returns_a_png_frame_mid_episode() -> None:
    async with (
        rt.serve_env(gym.make("CartPole-v1", render_mode="rgb_array")) as server,
        rt.RemoteEnv(server.address) as env,
    ):
        await env.connect()
        await env.configure(WORKFLOW_EDITION)
        await env.reset(env_pb.ResetRequest(seeds=[3], episode_ids=["ep"]))
        action = spaces_pb.SpaceValue(leaves=[(1).to_bytes(8, "little")])
        await env.step(env_pb.StepRequest(action=action, episode_ids=["ep"]))
        frame = await env.render()
        assert frame is not None and frame.startswith(b"\x89PNG\r\n\x1a\n")


async def test_render_is_none_when_the_env_renders_nothing() -> None:
    async with rt.serve_env(gym.make("CartPole-v1")) as server, rt.RemoteEnv(server.address) as env:
        await env.connect()
        await env.configure(WORKFLOW_EDITION)
        await env.reset(env_pb.ResetRequest(seeds=[3], episode_ids=["ep"]))
        assert await env.render() is None


async def test_a_plain_http1_server_is_not_a_grpc_endpoint() -> None:
    with http1_server() as address:
        env = rt.RemoteEnv(address, connect_timeout=10)
        with pytest.raises(rt.ConnectError, match="not a gRPC/HTTP2 endpoint"):
            await env.connect()
        await env.aclose()
        with pytest.raises(rt.ConnectError, match="not a gRPC/HTTP2 endpoint"):
            await rt.check_health(address, timeout=10)


def test_check_cli_names_a_non_grpc_endpoint() -> None:
    with http1_server() as address:
        done = run_cli("check", address, "--timeout", "10")
    assert done.returncode != 0
    assert "not a gRPC/HTTP2 endpoint" in done.stderr
    assert "connection lost" not in done.stderr


async def test_clients_work_without_async_with_and_close_their_tasks() -> None:
    async with rt.serve_env(gym.make("CartPole-v1")) as server:
        env = rt.RemoteEnv(server.address)
        info = await env.connect()
        assert info.contract is not None
        await env.aclose()
        with pytest.raises(rt.ConnectError, match="closed"):
            await env.connect()
    # no task of the client is left running: the nursery of this test would hang otherwise
    await trio.testing.wait_all_tasks_blocked()
