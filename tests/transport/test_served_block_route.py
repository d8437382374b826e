"""Shape D through the runtime: routes over served lane endpoints, a batch policy here.

Where the runtime has the block drive mode, such a route must run in it (the
served env is a ``LaneBlockEnv``); either way every episode equals a plain
gymnasium loop over single envs with the same seeds and policy.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio import serve_env
from rlmesh_trio.runtime import _modes

from .._lane_block_loop import angle_policy, plain_episodes


async def test_routes_over_served_lanes_equal_a_plain_gymnasium_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modes: list[bool] = []
    picks = getattr(_modes, "block_endpoints", None)  # the block drive mode, where it exists
    if picks is not None:

        def spy(loop: Any, session: Any) -> Any:
            chosen = picks(loop, session)
            modes.append(chosen is not None)
            return chosen

        monkeypatch.setattr(_modes, "block_endpoints", spy)
    seeds = list(range(10))
    async with (
        serve_env([gym.make("CartPole-v1") for _ in range(3)], "127.0.0.1:0") as one,
        serve_env([gym.make("CartPole-v1") for _ in range(3)], "127.0.0.1:0") as two,
    ):
        routes = rt.shard(
            envs=[one.address, two.address], model=rt.policy(batched=angle_policy), seeds=seeds
        )
        report = await rt.run_routes(routes)
    assert report.ok
    if picks is not None:
        assert modes == [True, True]
    got = sorted((e.seed, e.steps, e.reward) for e in report.episodes)
    assert got == sorted(plain_episodes("CartPole-v1", seeds, angle_policy))
