"""End-to-end checks of ``my_policy`` on real CartPole-v1 envs, over gRPC and in-process.

``servers`` (see ``conftest.py``) is ``(env_addresses, policy_address)``.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from my_policy import act

import rlmesh_trio as rt
from rlmesh_trio import spaces
from rlmesh_trio.testing import RecordingHooks

SEEDS = range(4)  # fixed seeds: the same episodes on every run
MAX_STEPS = 200
THRESHOLD = 195.0  # CartPole's classic "solved" bar, on 200-step episodes

Servers = tuple[list[str], str]


def test_act_pushes_toward_the_lean() -> None:
    assert act(np.array([0.0, 0.0, 0.05, 0.0])) == 1
    assert act(np.array([0.0, 0.0, -0.05, 0.0])) == 0
    assert act(np.array([0.0, 0.0, 0.02, -0.1])) == 0  # falling back left fast


async def test_policy_over_grpc_keeps_cartpole_up(servers: Servers) -> None:
    envs, policy = servers
    routes = rt.shard(envs, model=policy, seeds=SEEDS, max_episode_steps=MAX_STEPS)
    report = await rt.run_routes(routes)

    assert [outcome.status for outcome in report] == ["completed", "completed"]
    assert {ep.seed for ep in report.episodes} == set(SEEDS)
    assert report.mean_reward is not None and report.mean_reward >= THRESHOLD


async def test_grpc_and_in_process_agree(servers: Servers) -> None:
    # Same seeds, same policy: serving it over gRPC must not change a single observation.
    envs, policy = servers

    def make_env() -> gymnasium.Env:
        return gymnasium.make("CartPole-v1")

    async def observations(env: object, model: object) -> list[np.ndarray]:
        hooks = RecordingHooks()  # remembers every hook event of the run
        await rt.run_routes([rt.Route(env, model, seeds=[0, 1], max_episode_steps=50)], hooks=hooks)
        return [
            spaces.decode(event.observation_space, event.observation)
            for event in hooks.of("observation_emitted")
        ]

    served = await observations(envs[0], policy)
    local = await observations(make_env, act)
    assert len(served) == len(local) > 100
    for a, b in zip(served, local, strict=True):
        np.testing.assert_array_equal(a, b)


async def test_policy_sends_only_valid_actions(servers: Servers) -> None:
    envs, policy = servers
    hooks = RecordingHooks()
    route = rt.Route(envs[0], policy, seeds=[7], max_episode_steps=50)
    report = await rt.run_routes([route], hooks=hooks)

    actions = hooks.of("action_received")
    assert len(actions) == report.total_steps == 50
    action_space = gymnasium.spaces.Discrete(2)
    for event in actions:
        assert action_space.contains(int(spaces.decode(event.action_space, event.action)))
