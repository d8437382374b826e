"""ServerLimits on real loopback servers: the handshake deadline, the idle timeout, the
connection cap, the value object and the CLI's ``--limit`` (issue 22)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import hpack
import hyperframe.frame
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio import _wire as wire
from rlmesh_trio._wire._h2server import PREFACE
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

from ..wire.test_server_core import frames

SETTINGS = hyperframe.frame.SettingsFrame(0)


async def _until_closed(stream: trio.SocketStream, seconds: float) -> bytes:
    """Everything the server sends until it closes the connection (bounded)."""
    received = b""
    with trio.fail_after(seconds):
        while chunk := await stream.receive_some(65536):
            received += chunk
    return received


def _address(server: rt.ModelServer | rt.EnvServer) -> tuple[str, int]:
    host, port = server.address.rsplit(":", 1)
    return host, int(port)


async def test_a_client_that_never_sends_its_preface_is_closed_at_the_deadline() -> None:
    limits = rt.ServerLimits(handshake_timeout=0.2)
    async with rt.serve_model(cartpole_policy, limits=limits) as server:
        stream = await trio.open_tcp_stream(*_address(server))
        await _until_closed(stream, 10)  # the server's SETTINGS, then EOF
        await stream.aclose()
        assert await rt.check_health(server.address) == "SERVING"


async def test_a_silent_connection_is_closed_by_a_stopping_server() -> None:
    server = rt.ModelServer(cartpole_policy, "127.0.0.1:0")
    server.start()
    try:
        stream = await trio.open_tcp_stream(*_address(server))
        with trio.fail_after(10):  # our SETTINGS go out at accept, before the client speaks
            assert await stream.receive_some(65536)
    finally:
        await trio.to_thread.run_sync(server.shutdown)
    assert await _until_closed(stream, 10) == b""
    await stream.aclose()


async def test_an_idle_connection_gets_goaway_then_is_closed() -> None:
    limits = rt.ServerLimits(idle_timeout=0.2)
    async with rt.serve_env(gym.make("CartPole-v1"), limits=limits) as server:
        stream = await trio.open_tcp_stream(*_address(server))
        await stream.send_all(PREFACE + hyperframe.frame.SettingsFrame(0).serialize())
        received = await _until_closed(stream, 10)
        await stream.aclose()
        goaways = [f for f in frames(received) if isinstance(f, hyperframe.frame.GoAwayFrame)]
        assert goaways and goaways[-1].error_code == 0


async def test_connections_past_the_cap_are_closed_at_accept() -> None:
    limits = rt.ServerLimits(max_connections=2)
    async with rt.serve_model(cartpole_policy, limits=limits) as server:
        held = [await trio.open_tcp_stream(*_address(server)) for _ in range(2)]
        for stream in held:  # both are served: the server's SETTINGS arrive
            with trio.fail_after(10):
                assert await stream.receive_some(65536)
        extra = await trio.open_tcp_stream(*_address(server))
        await extra.send_all(PREFACE + hyperframe.frame.SettingsFrame(0).serialize())
        told = frames(await _until_closed(extra, 10))  # a FIN after them, not a reset
        await extra.aclose()
        assert isinstance(told[0], hyperframe.frame.SettingsFrame)
        (goaway,) = [f for f in told if isinstance(f, hyperframe.frame.GoAwayFrame)]
        assert (goaway.last_stream_id, goaway.error_code) == (0, 0xB)  # ENHANCE_YOUR_CALM
        assert goaway.additional_data == (
            b"too many connections: the server allows 2 at once (max_connections)"
        )
        with pytest.raises(rt.ConnectError) as refused:
            await rt.check_health(server.address)
        assert str(refused.value).endswith(
            ": the server closed the connection: too many connections: "
            "the server allows 2 at once (max_connections)"
        )
        for stream in held:
            await stream.aclose()


async def test_a_stream_reset_for_its_window_update_ends_its_call() -> None:
    # RFC 9113 §6.9.1: a stream window past 2^31-1 is a stream error. The call on that
    # stream ends with it (it would wait for its request forever, and so would the
    # idle timeout of its connection).
    limits = rt.ServerLimits(idle_timeout=0.2)
    async with rt.serve_model(cartpole_policy, limits=limits) as server:
        stream = await trio.open_tcp_stream(*_address(server))
        block = hpack.Encoder().encode(
            wire.request_headers("/rlmesh.model.v1.ModelService/Handshake", "127.0.0.1:1")
        )
        opening = hyperframe.frame.HeadersFrame(1, data=block, flags=["END_HEADERS"])
        overflow = hyperframe.frame.WindowUpdateFrame(1, window_increment=2**31 - 1)
        await stream.send_all(
            PREFACE + b"".join(f.serialize() for f in (SETTINGS, opening, overflow))
        )
        received = frames(await _until_closed(stream, 10))
        await stream.aclose()
        resets = [f for f in received if isinstance(f, hyperframe.frame.RstStreamFrame)]
        assert [(f.stream_id, f.error_code) for f in resets] == [(1, 0x3)]  # FLOW_CONTROL
        goaways = [f for f in received if isinstance(f, hyperframe.frame.GoAwayFrame)]
        assert goaways and goaways[-1].error_code == 0  # idle: the call is over


def test_limits_are_validated() -> None:
    assert rt.ServerLimits().listen_backlog >= 1024
    with pytest.raises(TypeError, match="max_connections must be an int"):
        rt.ServerLimits(max_connections=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idle_timeout must be positive and finite"):
        rt.ServerLimits(idle_timeout=float("inf"))
    with pytest.raises(TypeError, match="limits must be a ServerLimits"):
        rt.EnvServer(gym.make("CartPole-v1"), limits={"idle_timeout": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("bogus=1", "expected NAME=VALUE"),
        ("max-connections=1.5", "not a whole number"),
        ("idle-timeout=-1", "must be positive"),
    ],
)
def test_the_cli_refuses_a_bad_limit_in_one_line(option: str, message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rlmesh_trio.cli", "serve-model", "x:y", "--limit", option],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --limit") and message in result.stderr
