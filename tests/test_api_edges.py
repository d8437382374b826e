"""Python-API edges (issue 12): shared env objects, labels, logging, hooks, event loops."""

from __future__ import annotations

import gymnasium
import pytest

import rlmesh_trio as rt
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


def _policy(obs: object) -> int:
    return 0


# ------------------------------------------------------------- item 2: one env, two routes


def test_one_gymnasium_env_in_two_routes_is_refused() -> None:
    env = gymnasium.make("CartPole-v1")
    routes = rt.shard(envs=[env, env], model=_policy, episodes=4)
    with pytest.raises(rt.InvalidSpec) as info:
        rt.run(routes)
    text = str(info.value)
    assert "route route-1" in text and "route route-0" in text and "one env object" in text


async def test_one_runtime_env_in_two_routes_is_refused() -> None:
    env = ScriptedEnv(episode_lengths=2)
    routes = [
        rt.Route(env=env, model=ScriptedModel(), episodes=1, route_id="a"),
        rt.Route(env=env, model=ScriptedModel(), episodes=1, route_id="b"),
    ]
    with pytest.raises(rt.InvalidSpec, match=r"route b: .*ScriptedEnv.* route a"):
        await rt.run_routes(routes)
    assert env.closes == []


async def test_a_lane_listed_twice_or_in_two_routes_is_refused() -> None:
    shared = gymnasium.make("CartPole-v1")
    other = gymnasium.make("CartPole-v1")
    with pytest.raises(rt.InvalidSpec, match=r"route solo: .* route solo"):
        await rt.run_routes(
            [rt.Route(env=[shared, shared], model=_policy, episodes=1, route_id="solo")]
        )
    routes = [
        rt.Route(env=[shared, other], model=_policy, episodes=1, route_id="x"),
        rt.Route(env=shared, model=_policy, episodes=1, route_id="y"),
    ]
    with pytest.raises(rt.InvalidSpec, match=r"route y: .* route x"):
        await rt.run_routes(routes)


async def test_factories_and_separate_envs_are_fine() -> None:
    def factory() -> gymnasium.Env:  # type: ignore[type-arg]
        return gymnasium.make("CartPole-v1")

    envs = [factory, factory, gymnasium.make("CartPole-v1"), gymnasium.make("CartPole-v1")]
    report = await rt.run_routes(rt.shard(envs=envs, model=_policy, seeds=range(8)))
    assert report.ok and report.total_episodes == 8
