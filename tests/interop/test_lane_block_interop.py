"""A lane block against rlmesh 0.1.0's lane server: one request per lane, episodes unchanged.

0.1.0's lane server (``rlmesh.EnvServer`` over a list of envs) advertises
``subset_step`` only. It does answer a several-lane subset request correctly
(probed), but it does not say so, so the block falls back to what 0.1.0
runtimes send: one request per lane, every lane in flight at once.
"""

from __future__ import annotations

from typing import Any

import pytest

from rlmesh_trio import RemoteEnv
from rlmesh_trio._protocol import CAP_MULTI_LANE_SUBSET, WORKFLOW_EDITION
from rlmesh_trio.transport.client._remote_lanes import RemoteLaneBlock

from .._lane_block_loop import angle_policy, drive_block, plain_episodes
from .._rlmesh_procs import rlmesh_env

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

SEEDS = [4, 17, 2, 9, 30, 1, 12]


async def test_block_falls_back_to_one_lane_per_request_with_the_same_episodes() -> None:
    with rlmesh_env(lanes=3) as server:
        env = RemoteEnv(server.address)
        try:
            info = await env.connect()
            assert info.has_capability("subset_step")
            assert not info.has_capability(CAP_MULTI_LANE_SUBSET)
            await env.configure(WORKFLOW_EDITION)
            assert env.block_ready and env.num_lanes == 3
            got = await drive_block(env, SEEDS, angle_policy)
        finally:
            await env.aclose()
    assert got == plain_episodes("CartPole-v1", SEEDS, angle_policy)


class Recording:
    """The real client, noting how many lanes each request names."""

    def __init__(self, env: RemoteEnv) -> None:
        self.env = env
        self.widths: list[tuple[str, int]] = []

    async def reset(self, request: Any) -> Any:
        self.widths.append(("reset", len(request.env_indices)))
        return await self.env.reset(request)

    async def step(self, request: Any) -> Any:
        self.widths.append(("step", len(request.env_indices)))
        return await self.env.step(request)


async def test_the_fallback_sends_one_lane_per_request() -> None:
    with rlmesh_env(lanes=3) as server:
        env = RemoteEnv(server.address)
        try:
            info = await env.connect()
            await env.configure(WORKFLOW_EDITION)
            recording = Recording(env)
            block = RemoteLaneBlock(recording, info)  # type: ignore[arg-type]
            assert not block.multi_lane
            got = await drive_block(block, SEEDS[:4], angle_policy)
        finally:
            await env.aclose()
    assert got == plain_episodes("CartPole-v1", SEEDS[:4], angle_policy)
    assert recording.widths and {width for _, width in recording.widths} == {1}
