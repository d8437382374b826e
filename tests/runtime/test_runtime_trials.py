"""Trial ordinals (trial_index_base, the trial_index reset option) and per-episode step timings."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest
import trio
import trio.testing
from gymnasium.envs.classic_control import CartPoleEnv

import rlmesh_trio as rt
from rlmesh_trio import InvalidSpec, RouteDriver, RouteSpec, spaces
from rlmesh_trio._protocol import core_pb
from rlmesh_trio.runtime._meta import RESET_OPTIONS_KEY, declares_reset_option
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel, scripted_contract


def declaring(declared: Any, num_envs: int = 1, autoreset: int = 3) -> core_pb.EnvContract:
    contract = scripted_contract(num_envs, autoreset)
    assert contract.spec is not None
    contract.spec.metadata = spaces.meta_map_from_python({RESET_OPTIONS_KEY: declared})
    return contract


def driver(env: ScriptedEnv, model: ScriptedModel | None = None, **spec: Any) -> RouteDriver:
    return RouteDriver(
        RouteSpec(route_id="r0", session_id="s", env_id="e", **spec), env, model or ScriptedModel()
    )


def reset_trials(env: ScriptedEnv) -> list[int | None]:
    return [
        None if r.options is None else spaces.meta_to_python(r.options)["trial_index"]
        for r in env.resets
    ]


@pytest.mark.parametrize("declared", [["render_fps", "trial_index"], "trial_index"])
async def test_a_declaring_env_gets_each_episodes_trial(declared: Any) -> None:
    env = ScriptedEnv(episode_lengths=2, contract=declaring(declared))
    report = await driver(env, max_episodes=3, trial_index_base=7).run()
    assert reset_trials(env) == [7, 8, 9]
    assert [ep.trial for ep in report.episodes] == [7, 8, 9]


async def test_an_env_that_did_not_declare_never_sees_the_option() -> None:
    env = ScriptedEnv(episode_lengths=2, contract=declaring(["render_fps"]))
    report = await driver(env, max_episodes=2, trial_index_base=3).run()
    assert reset_trials(env) == [None, None]
    assert [ep.trial for ep in report.episodes] == [3, 4]  # recorded either way


async def test_lanes_reset_with_their_own_trials() -> None:
    env = ScriptedEnv(num_envs=2, episode_lengths=[2, 3], contract=declaring("trial_index", 2))
    report = await driver(env, max_episodes=4).run()
    assert sorted(t for t in reset_trials(env) if t is not None) == [0, 1, 2, 3]
    assert all(len(r.env_indices) == 1 for r in env.resets)
    assert sorted(ep.trial for ep in report.episodes if ep.trial is not None) == [0, 1, 2, 3]
    assert {ep.index: ep.trial for ep in report.episodes} == {
        ep.index: ep.index for ep in report.episodes
    }


async def test_an_env_owning_its_resets_has_no_trials_and_refuses_a_base() -> None:
    env = ScriptedEnv(num_envs=2, autoreset="next_step", contract=declaring("trial_index", 2, 1))
    report = await driver(env, max_episodes=2).run()
    assert reset_trials(env) == [None]
    assert [ep.trial for ep in report.episodes] == [None, None]
    env = ScriptedEnv(num_envs=2, autoreset="next_step")
    with pytest.raises(InvalidSpec, match="trial_index_base requires an env with autoreset"):
        await driver(env, max_episodes=2, trial_index_base=1).run()


def test_a_negative_base_is_refused_where_it_is_given() -> None:
    with pytest.raises(InvalidSpec, match="trial_index_base must be >= 0, got -1"):
        RouteSpec(route_id="r", session_id="s", trial_index_base=-1).validate()
    with pytest.raises(InvalidSpec, match="route r: trial_index_base must be >= 0, got -2"):
        rt.Route(env="127.0.0.1:1", model="127.0.0.1:2", route_id="r", trial_index_base=-2)


def test_declarations_are_read_as_rlmesh_reads_them() -> None:
    def meta(value: Any) -> Any:
        return spaces.meta_map_from_python({RESET_OPTIONS_KEY: value})

    assert declares_reset_option(meta("trial_index"), "trial_index")
    assert declares_reset_option(meta(["a", "trial_index"]), "trial_index")
    assert not declares_reset_option(meta("trial_indexes"), "trial_index")
    assert not declares_reset_option(meta(3), "trial_index")
    assert not declares_reset_option(spaces.meta_map_from_python({}), "trial_index")
    assert not declares_reset_option(None, "trial_index")


def test_shard_deals_trials_in_consecutive_blocks() -> None:
    routes = rt.shard(["a:1", "b:1", "c:1"], "m:1", episodes=7, trial_index_base=10)
    assert [(r.episode_budget, r.trial_index_base) for r in routes] == [(3, 10), (2, 13), (2, 15)]
    routes = rt.shard(["a:1", "b:1"], "m:1", seeds=range(5))
    # Without a base the routes leave their trials to the run, which deals the same blocks.
    assert [r.trial_index_base for r in routes] == [None, None]


# ---- per-episode predict and step timings ------------------------------------


@pytest.mark.parametrize(("frames", "predict_ms"), [(1, 500.0), (2, 250.0)])
async def test_episode_timings_are_per_step_means(
    autojump_clock: trio.testing.MockClock, frames: int, predict_ms: float
) -> None:
    env = ScriptedEnv(episode_lengths=[4, 2], delays={"step": 0.25, "reset": 3.0})
    model = ScriptedModel(delays={"predict": 0.5}, frames=frames)
    report = await driver(env, model, max_episodes=2).run()
    for episode in report.episodes:
        # a predict that returned two frames is charged half to each step it served
        assert episode.predict_ms == pytest.approx(predict_ms)
        assert episode.step_ms == pytest.approx(250.0)  # resets are not steps


# ---- end to end: a gymnasium env behind our server ---------------------------


class TrialCartPole(CartPoleEnv):
    """CartPole that declares the trial_index reset option and records what it got."""

    metadata: ClassVar[dict[str, Any]] = {
        **CartPoleEnv.metadata,
        RESET_OPTIONS_KEY: ["trial_index"],
    }

    def __init__(self) -> None:
        super().__init__()
        self.trials: list[int] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if options is not None and "trial_index" in options:
            self.trials.append(int(options["trial_index"]))
        return super().reset(seed=seed, options=options)


async def test_a_served_gymnasium_env_receives_trial_indices() -> None:
    env = TrialCartPole()

    def policy(obs: np.ndarray) -> int:
        return 1 if obs[2] + 0.5 * obs[3] > 0 else 0

    async with rt.serve_env(gymnasium.wrappers.TimeLimit(env, 20), "127.0.0.1:0") as server:
        route = rt.Route(env=server.address, model=policy, seeds=[1, 2, 3], trial_index_base=40)
        report = await rt.run_routes([route])
    assert env.trials == [40, 41, 42]
    assert [(ep.seed, ep.trial) for ep in report.episodes] == [(1, 40), (2, 41), (3, 42)]
    assert all(ep.step_ms is not None and ep.step_ms > 0 for ep in report.episodes)
    assert all(ep.predict_ms is not None and ep.predict_ms >= 0 for ep in report.episodes)
