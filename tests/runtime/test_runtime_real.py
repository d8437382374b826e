"""The driver against real parts: gymnasium envs via LocalEnv, a numpy policy via LocalModel.

Same semantics as the 0.1.0 servers (the env host is shared with the gRPC
env server), no network.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import LocalEnv, LocalModel, RouteDriver, RouteSpec
from rlmesh_trio.testing import RecordingHooks


def push_left(obs: np.ndarray) -> int:
    return 0


async def test_cartpole_single_env_with_seeds() -> None:
    env = LocalEnv(lambda: gym.make("CartPole-v1"))
    model = LocalModel(push_left)
    hooks = RecordingHooks()
    try:
        spec = RouteSpec(route_id="cp", session_id="s", seeds=(1, 2, 3))
        report = await RouteDriver(spec, env, model, hooks).run()
    finally:
        await env.aclose()
    assert report.total_episodes == 3
    assert [e.seed for e in report.episodes] == [1, 2, 3]
    # Always pushing left, CartPole falls over within a few steps; reward 1 per step.
    for episode in report.episodes:
        assert episode.terminated and not episode.truncated
        assert 5 <= episode.steps < 30 and episode.reward == float(episode.steps)
    assert report.total_steps == sum(e.steps for e in report.episodes)
    # Same seed, same policy: a second run reproduces the episodes exactly.
    env2 = LocalEnv(lambda: gym.make("CartPole-v1"))
    try:
        again = await RouteDriver(
            RouteSpec(route_id="cp2", session_id="s", seeds=(1, 2, 3)), env2, LocalModel(push_left)
        ).run()
    finally:
        await env2.aclose()
    assert [e.steps for e in again.episodes] == [e.steps for e in report.episodes]


async def test_cartpole_runtime_truncation() -> None:
    env = LocalEnv(lambda: gym.make("CartPole-v1"))
    try:
        report = await RouteDriver(
            RouteSpec(route_id="cp", session_id="s", max_episodes=2, max_episode_steps=3),
            env,
            LocalModel(push_left),
        ).run()
    finally:
        await env.aclose()
    assert [(e.steps, e.truncated, e.terminated) for e in report.episodes] == [
        (3, True, False),
        (3, True, False),
    ]


async def test_vector_env_next_step() -> None:
    def make() -> gym.vector.VectorEnv:
        return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(3)])

    env = LocalEnv(make)
    try:
        report = await RouteDriver(
            RouteSpec(route_id="vec", session_id="s", max_episodes=7),
            env,
            LocalModel(push_left),
        ).run()
    finally:
        await env.aclose()
    assert report.total_episodes == 7
    assert {e.env_index for e in report.episodes} == {0, 1, 2}
    assert all(e.terminated and e.steps > 0 for e in report.episodes)


@pytest.mark.parametrize("num_lanes", [2, 3])
async def test_lanes_from_a_list_of_envs(num_lanes: int) -> None:
    env = LocalEnv(lambda: [gym.make("CartPole-v1") for _ in range(num_lanes)])
    try:
        report = await RouteDriver(
            RouteSpec(route_id="lanes", session_id="s", seeds=tuple(range(10, 15))),
            env,
            LocalModel(push_left),
        ).run()
    finally:
        await env.aclose()
    assert report.total_episodes == 5
    assert sorted(e.seed for e in report.episodes) == [10, 11, 12, 13, 14]
    assert {e.env_index for e in report.episodes} <= set(range(num_lanes))
    assert all(e.terminated for e in report.episodes)
