"""Python-API edges (issue 12): shared env objects, labels, logging, hooks, event loops."""

from __future__ import annotations

import re

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


# ------------------------------------------------------------- item 5: NaN in the JSON report


class OddReward(gymnasium.Wrapper):  # type: ignore[type-arg]
    """CartPole whose episode rewards are NaN, then +inf, then ordinary (per reset)."""

    def __init__(self, rewards: list[float]) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.rewards = rewards
        self.episode = -1

    def reset(self, **kwargs: object) -> object:
        self.episode += 1
        return super().reset(**kwargs)  # type: ignore[arg-type]

    def step(self, action: object) -> object:
        obs, _, terminated, truncated, info = super().step(action)
        return obs, self.rewards[self.episode], terminated, truncated, info


def _strict(text: str) -> object:
    import json

    def refuse(token: str) -> object:
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("rewards", "note", "raws"),
    [
        ([float("nan"), 1.0], "nan in episode rewards", ["nan", None]),
        ([float("inf"), float("-inf")], "-inf, inf in episode rewards", ["inf", "-inf"]),
    ],
)
async def test_nan_rewards_write_strict_json(
    rewards: list[float], note: str, raws: list[str | None]
) -> None:
    route = rt.Route(env=OddReward(rewards), model=_policy, seeds=[1, 2], route_id="odd")
    report = await rt.run_routes([route])
    data = _strict(report.to_json())
    assert isinstance(data, dict)
    assert data["mean_reward"] is None
    assert data["mean_reward_note"] == note
    episodes = data["routes"][0]["episodes"]
    assert [ep.get("reward_raw") for ep in episodes] == raws
    assert [ep["reward"] is None for ep in episodes] == [raw is not None for raw in raws]


async def test_finite_rewards_keep_the_plain_json_shape() -> None:
    route = rt.Route(env=gymnasium.make("CartPole-v1"), model=_policy, seeds=[1])
    data = _strict((await rt.run_routes([route])).to_json())
    assert isinstance(data, dict)
    assert isinstance(data["mean_reward"], float) and "mean_reward_note" not in data
    assert "reward_raw" not in data["routes"][0]["episodes"][0]


# ------------------------------------------------- items 10 and 13: the wrong event loop


def _one_route() -> list[rt.Route]:
    return [rt.Route(env=ScriptedEnv(episode_lengths=2), model=ScriptedModel(), episodes=1)]


def test_run_routes_under_asyncio_names_the_asyncio_call() -> None:
    import asyncio

    async def main() -> rt.RunReport:
        return await rt.run_routes(_one_route())

    with pytest.raises(rt.WrongEventLoop) as info:
        asyncio.run(main())
    assert str(info.value) == (
        "run_routes must run under Trio; from asyncio use `await asyncio.to_thread(rt.run, ...)`"
    )


def test_run_inside_asyncio_names_to_thread_and_that_works() -> None:
    import asyncio

    async def wrong() -> rt.RunReport:
        return rt.run(_one_route())

    async def right() -> rt.RunReport:
        return await asyncio.to_thread(rt.run, _one_route())

    with pytest.raises(rt.WrongEventLoop, match=r"asyncio event loop.*asyncio\.to_thread\(rt\.run"):
        asyncio.run(wrong())
    assert asyncio.run(right()).total_episodes == 1


async def test_run_inside_trio_names_run_routes() -> None:
    with pytest.raises(rt.WrongEventLoop) as info:
        rt.run(_one_route())
    assert "inside a running Trio run" in str(info.value)
    assert "`await rt.run_routes(...)`" in str(info.value)
    assert isinstance(info.value, RuntimeError)


# ----------------------------------------------------- item 17: client options on run / run_routes

TOKEN = "s3cret-token"


async def test_run_routes_passes_client_options_to_every_address() -> None:
    from rlmesh_trio.inprocess._demo_policy import cartpole_policy

    async with (
        rt.serve_env(gymnasium.make("CartPole-v1"), token=TOKEN) as env_server,
        rt.serve_model(cartpole_policy, token=TOKEN) as model_server,
    ):
        route = rt.Route(env=env_server.address, model=model_server.address, seeds=[3])
        report = await rt.run_routes([route], client_options={"token": TOKEN})
        assert report.ok and report.total_episodes == 1
        refused = await rt.run_routes([route], on_failure="isolate")
    assert refused.routes[0].status == "failed"
    # Env and model connect concurrently: whichever refuses first names itself.
    assert re.search(r"UNAUTHENTICATED: invalid (env|model) token", str(refused.routes[0].error))


def test_run_passes_client_options_too() -> None:
    from .._cli import serving

    with serving("serve-env", "CartPole-v1", "--token", TOKEN) as address:
        route = rt.Route(env=address, model=_policy, seeds=[3])
        ok = rt.run([route], client_options={"token": TOKEN})
        refused = rt.run([route], on_failure="isolate")
    assert ok.ok and ok.total_episodes == 1
    assert "invalid env token" in str(refused.routes[0].error)


# ----------------------------------------------------------- item 20: labels in the report


async def test_remote_endpoint_routes_are_labelled_by_address() -> None:
    from rlmesh_trio.inprocess._demo_policy import cartpole_policy

    async with (
        rt.serve_env(gymnasium.make("CartPole-v1")) as env_server,
        rt.serve_model(cartpole_policy) as model_server,
    ):
        env = rt.RemoteEnv(env_server.address)
        model = rt.RemoteModel(model_server.address)
        route = rt.Route(env=env, model=model, seeds=[1], route_id="remote")
        try:
            report = await rt.run_routes([route])
        finally:
            await model.aclose()
            await env.aclose()
    outcome = report.routes[0].to_dict()
    assert (outcome["env"], outcome["model"]) == (env_server.address, model_server.address)


def test_cli_labels_an_env_id_route_with_the_id(tmp_path: object) -> None:
    import json
    import pathlib

    from .._api_cli import run_demo

    out = pathlib.Path(str(tmp_path)) / "report.json"
    done = run_demo("--seeds", "0:2", "--json", str(out))
    assert done.returncode == 0, done.stderr
    routes = json.loads(out.read_text())["routes"]
    assert [r["env"] for r in routes] == ["CartPole-v1"]
    assert routes[0]["model"] == "cartpole_policy"


# ------------------------------------------------- item 22: one log line per failing route


@pytest.mark.parametrize("on_failure", ["isolate", "cancel_siblings"])
async def test_each_failing_route_is_logged_once(
    on_failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    routes = [
        rt.Route(
            env=ScriptedEnv(episode_lengths=2, fail_at={"step": 1}),
            model=ScriptedModel(),
            episodes=2,
            route_id=f"bad-{i}",
        )
        for i in range(6)
    ]
    caplog.set_level(logging.WARNING, logger="rlmesh_trio.orchestrator")
    if on_failure == "isolate":
        report = await rt.run_routes(routes, on_failure="isolate")
    else:
        with pytest.raises(rt.RunFailed) as info:
            await rt.run_routes(routes)
        report = info.value.report
    failed = [o.route_id for o in report.routes if o.status == "failed"]
    lines = [r.getMessage() for r in caplog.records if "failed:" in r.getMessage()]
    assert len(lines) == len(failed) >= 1
    assert sorted(line.split()[1] for line in lines) == sorted(failed)
    if on_failure == "isolate":
        assert len(failed) == 6


# ------------------------------------------------- item 24 (part): hooks that are not hooks


@pytest.mark.parametrize("bad", [object(), "progress", {"episode_completed": print}])
def test_hook_chain_refuses_a_non_hooks_object(bad: object) -> None:
    with pytest.raises(rt.InvalidSpec) as info:
        rt.HookChain([rt.RuntimeHooks(), bad])  # type: ignore[list-item]
    assert "HookChain hooks[1]" in str(info.value)
    assert f"{type(bad).__name__} object is not runtime hooks" in str(info.value)


async def test_run_routes_refuses_a_non_hooks_object_up_front() -> None:
    env = ScriptedEnv(episode_lengths=2)
    route = rt.Route(env=env, model=ScriptedModel(), episodes=1)
    with pytest.raises(rt.InvalidSpec, match=r"hooks: int object is not runtime hooks"):
        await rt.run_routes([route], hooks=42)  # type: ignore[arg-type]
    assert env.calls == []  # nothing started


def test_sync_hook_methods_are_refused() -> None:
    class SyncHooks:
        def episode_completed(self, event: object) -> None:
            pass

    with pytest.raises(rt.InvalidSpec, match=r"SyncHooks.episode_completed must be an async"):
        rt.HookChain([SyncHooks()])  # type: ignore[list-item]


async def test_duck_typed_hooks_run_without_a_warning_per_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Counting:
        def __init__(self) -> None:
            self.completed = 0

        async def episode_completed(self, event: object) -> None:
            self.completed += 1

    direct, chained = Counting(), Counting()
    routes = [
        rt.Route(env=ScriptedEnv(episode_lengths=3), model=ScriptedModel(), episodes=2)
        for _ in range(2)
    ]
    await rt.run_routes(routes[:1], hooks=direct)  # type: ignore[arg-type]
    await rt.run_routes(routes[1:], hooks=rt.HookChain([chained, rt.RuntimeHooks()]))  # type: ignore[list-item]
    assert (direct.completed, chained.completed) == (2, 2)
    assert [r for r in caplog.records if "hook" in r.getMessage()] == []


def test_shard_refuses_an_unknown_route_option_by_name() -> None:
    with pytest.raises(
        rt.InvalidSpec, match=r"shard: unknown route option\(s\) bogus; a Route takes"
    ):
        rt.shard(envs=[gymnasium.make("CartPole-v1")], model=rt.RANDOM, seeds=[1], bogus=3)
