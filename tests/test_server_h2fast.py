"""Our servers' Join traffic takes the short HTTP/2 paths: DATA-only reads and one-frame replies."""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest

import rlmesh_trio as rt
from rlmesh_trio._demo_policy import cartpole_policy
from rlmesh_trio.transport import _h2fast


@pytest.fixture
def server_frames(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What ``send_data`` answered for frames sent on server-side connections."""
    answers: list[bool] = []
    original = _h2fast.send_data

    def spy(stream: Any, frame: bytes) -> bool:
        sent = original(stream, frame)
        if not stream._h2_connection.config.client_side:
            answers.append(sent)
        return sent

    monkeypatch.setattr(_h2fast, "send_data", spy)
    return answers


def _fast_reads(server: Any) -> list[int]:
    counts = []
    for protocol in list(server._connections._protocols):
        receiver = protocol.data_received
        counts.append(receiver.fast if isinstance(receiver, _h2fast._FastReceive) else -1)
    return counts


async def test_env_and_model_servers_use_the_short_paths(server_frames: list[bool]) -> None:
    env = gymnasium.make("CartPole-v1")
    async with (
        rt.serve_env(env, "127.0.0.1:0") as env_server,
        rt.serve_model(cartpole_policy, "127.0.0.1:0") as model_server,
    ):
        route = rt.Route(
            env=env_server.address, model=model_server.address, seeds=[0], max_episode_steps=40
        )
        report = await rt.run_routes([route])
        env_reads, model_reads = _fast_reads(env_server), _fast_reads(model_server)
    assert report.ok and report.total_steps == 40
    # every step and predict request after the first ones arrived in a DATA-only read
    assert len(env_reads) == 1 and env_reads[0] >= 30
    assert len(model_reads) == 1 and model_reads[0] >= 30
    # replies: one DATA frame each, written directly (41 env replies + 40 predicts at least)
    assert server_frames.count(True) >= 80


class _PlainStream:
    """A server stream whose state the short path must not use: headers not yet sent."""

    _send_initial_metadata_done = False

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send_message(self, payload: bytes) -> None:
        self.sent.append(payload)


async def test_replies_fall_back_to_grpclib_when_the_short_path_does_not_apply(
    server_frames: list[bool],
) -> None:
    stream = _PlainStream()
    await _h2fast.send_server_message(stream, b"reply")
    assert stream.sent == [b"reply"]
    assert server_frames == []  # never tried: the headers were not sent yet
