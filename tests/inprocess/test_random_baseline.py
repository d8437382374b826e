"""``rt.RANDOM`` / ``--model random`` (issue 12 item 28): samples the env's action space,
seeded from each episode's seed, on single, lane and NEXT_STEP vector envs."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trio

import rlmesh_trio as rt
from rlmesh_trio.cli._targets import resolve_model

from .._cli import run_to_json


class Recording(gym.Wrapper[Any, Any, Any, Any]):
    """Records the actions of each episode, keyed by the seed it was reset with."""

    def __init__(self, env: gym.Env[Any, Any], log: dict[int | None, list[Any]]) -> None:
        super().__init__(env)
        self.log = log
        self.current: list[Any] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.current = self.log.setdefault(seed, [])
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        self.current.append(np.asarray(action).tolist())
        return super().step(action)


def expected_actions(space: gym.Space[Any], seed: int, n: int) -> list[Any]:
    space.seed(seed)
    return [np.asarray(space.sample()).tolist() for _ in range(n)]


async def run_random(env: Any, seeds: list[int]) -> rt.RunReport:
    route = rt.Route(env=env, model=rt.RANDOM, seeds=seeds)
    return await rt.run_routes([route], handle_sigint=False)


async def test_single_env_actions_are_the_seeded_samples_of_the_action_space() -> None:
    log: dict[int | None, list[Any]] = {}
    report = await run_random(Recording(gym.make("CartPole-v1"), log), [3, 4, 5])
    assert report.total_episodes == 3
    assert report.routes[0].model == "random"
    for seed in (3, 4, 5):
        actions = log[seed]
        assert actions == expected_actions(gym.spaces.Discrete(2), seed, len(actions))


async def test_box_actions_and_the_same_seeds_give_the_same_actions_every_run() -> None:
    runs = []
    for _ in range(2):
        log: dict[int | None, list[Any]] = {}
        env = Recording(gym.make("Pendulum-v1", max_episode_steps=20), log)
        report = await run_random(env, [7, 8])
        runs.append((log, [e.reward for e in report.episodes]))
    assert runs[0] == runs[1]
    box = gym.make("Pendulum-v1").action_space
    assert runs[0][0][7] == expected_actions(box, 7, 20)


async def test_lanes_draw_each_episode_from_its_own_seed() -> None:
    log: dict[int | None, list[Any]] = {}
    lanes = [Recording(gym.make("CartPole-v1"), log) for _ in range(3)]
    report = await run_random(lanes, list(range(10, 16)))
    assert report.total_episodes == 6
    for seed in range(10, 16):
        assert log[seed] == expected_actions(gym.spaces.Discrete(2), seed, len(log[seed]))


async def test_vector_next_step_envs_are_reproducible() -> None:
    def episodes() -> list[tuple[int, int, float]]:
        vector = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(3)])
        vector.reset(seed=123)  # the env owns its resets: make its own draws repeatable
        route = rt.Route(env=vector, model=rt.RANDOM, episodes=7)
        report = trio.run(lambda: rt.run_routes([route], handle_sigint=False))
        return sorted((e.env_index, e.steps, e.reward) for e in report.episodes)

    first = await trio.to_thread.run_sync(episodes)
    assert len(first) == 7
    assert await trio.to_thread.run_sync(episodes) == first


async def test_random_over_a_served_env() -> None:
    async with rt.serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as server:
        report = await run_random(server.address, [0, 1])
    local = await run_random(gym.make("CartPole-v1"), [0, 1])
    assert [e.steps for e in report.episodes] == [e.steps for e in local.episodes]


def test_random_is_a_picklable_singleton_and_the_cli_word() -> None:
    assert pickle.loads(pickle.dumps(rt.RANDOM)) is rt.RANDOM
    assert resolve_model("random") is rt.RANDOM
    assert repr(rt.RANDOM) == "rlmesh_trio.RANDOM"


def test_cli_model_random_is_reproducible(tmp_path: Path) -> None:
    outputs = []
    for name in ("a.json", "b.json"):
        out = tmp_path / name
        data = run_to_json(out, "--env", "CartPole-v1", "--model", "random", "--seeds", "0:4")
        outputs.append([(ep["seed"], ep["steps"]) for r in data["routes"] for ep in r["episodes"]])
    assert outputs[0] == outputs[1] and len(outputs[0]) == 4
