"""rlmesh 0.1.0's own runtime drives our ModelServer (and agrees with rlmesh's own server)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import serve_env, serve_model
from rlmesh_trio.inprocess._demo_policy import CARTPOLE_POLICY

from .._rlmesh_inproc import in_thread, rlmesh_server
from .._rlmesh_procs import rlmesh_model
from .._rlmesh_serve import angle_policy

rlmesh = pytest.importorskip("rlmesh")

pytestmark = pytest.mark.interop

SEEDS = [1, 2, 3, 4, 5, 6]


def episodes_of(result: Any) -> list[tuple[Any, int, float, bool, bool]]:
    return [(e.seed, e.steps, e.reward, e.terminated, e.truncated) for e in result.episodes]


def remote_run(model_address: str, env: Any, seeds: list[int] = SEEDS) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rlmesh.run(rlmesh.RemoteModel(model_address), env, seeds=seeds)


async def test_rlmesh_run_with_our_model_matches_rlmesh_served_model() -> None:
    """Same env server, same policy, same seeds: our model server vs rlmesh's."""
    with rlmesh_model("angle") as theirs:
        async with rlmesh_server(gym.make("CartPole-v1")) as env_address:
            async with serve_model(angle_policy, "127.0.0.1:0") as ours:
                mine = await in_thread(lambda: remote_run(ours.address, env_address))
            reference = await in_thread(lambda: remote_run(theirs.address, env_address))
    assert episodes_of(mine) == episodes_of(reference)
    assert len({e.steps for e in mine.episodes}) > 1  # the angle rule gives varied lengths
    assert [e.seed for e in mine.episodes] == SEEDS


async def test_rlmesh_run_with_our_batched_demo_policy_over_our_env_server() -> None:
    """rlmesh's runtime against both of our servers; the demo rule matches rlmesh's 'cartpole'."""
    seeds = [7]
    with rlmesh_model("cartpole") as theirs:
        async with (
            serve_model(CARTPOLE_POLICY, "127.0.0.1:0") as ours,
            serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as env,
        ):
            mine = await in_thread(lambda: remote_run(ours.address, env.address, seeds))
            reference = await in_thread(lambda: remote_run(theirs.address, env.address, seeds))
    assert episodes_of(mine) == episodes_of(reference)
    assert all(e.steps == 500 and e.truncated for e in mine.episodes)


class DictObsEnv(gym.Env[dict[str, Any], int]):
    """Dict observations (Box, Discrete, Text, declared out of key order); Discrete actions.

    Rewards and episode lengths depend on every part of the observation the
    policy saw, so identical episodes mean the policy got the right values.
    """

    observation_space = gym.spaces.Dict(
        {
            "zpos": gym.spaces.Box(-5.0, 5.0, (2,), np.float32),
            "tag": gym.spaces.Text(max_length=8),
            "count": gym.spaces.Discrete(64),
        }
    )
    action_space = gym.spaces.Discrete(3)

    def _obs(self) -> dict[str, Any]:
        return {"zpos": self.pos.copy(), "tag": self.tag, "count": self.count}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, size=2).astype(np.float32)
        self.tag = "ab" * int(self.np_random.integers(1, 4))
        self.count = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.count += 1
        self.pos[0] += (int(action) - 1) * 0.7
        self.pos[1] -= 0.1
        self.tag = self.tag[1:] + self.tag[0]
        reward = float(action) + 0.01 * self.count
        terminated = bool(abs(self.pos[0]) > 2.0)
        return self._obs(), reward, terminated, self.count >= 25, {}


def dict_policy(obs: dict[str, Any]) -> int:
    lean = float(obs["zpos"][0]) + 0.1 * float(obs["zpos"][1])
    if (int(obs["count"]) + len(obs["tag"])) % 4 == 0:
        return 1
    return 2 if lean > 0 else 0  # pushes away from the centre: episode lengths vary


class TextTalkEnv(gym.Env[str, str]):
    """Text in, text out: the episode ends when the policy says 'bye'."""

    observation_space = gym.spaces.Text(max_length=16)
    action_space = gym.spaces.Text(max_length=16)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return "héllo" + "!" * (seed or 0), {}

    def step(self, action: Any) -> Any:
        text = str(action)
        return text.upper(), float(len(text)), text == "bye", False, {}


def text_policy(obs: str) -> str:
    return "bye" if obs.startswith("HI") else "hi" + "!" * len(obs)


def local_episodes(make: Callable[[], gym.Env[Any, Any]], policy: Any, seeds: list[int]) -> Any:
    """The reference: the same policy stepping the env directly, no transport at all."""
    out = []
    for seed in seeds:
        env = make()
        obs, _ = env.reset(seed=seed)
        steps, total = 0, 0.0
        while True:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            steps += 1
            total += float(reward)
            if terminated or truncated:
                out.append((seed, steps, total, bool(terminated), bool(truncated)))
                break
    return out


@pytest.mark.parametrize(
    ("make", "policy"),
    [(DictObsEnv, dict_policy), (TextTalkEnv, text_policy)],
    ids=["dict", "text"],
)
async def test_rlmesh_remote_model_against_our_server_with_dict_and_text_spaces(
    make: Callable[[], gym.Env[Any, Any]], policy: Any
) -> None:
    seeds = [0, 1, 2, 3]
    async with rlmesh_server(make()) as env_address:
        async with serve_model(policy, "127.0.0.1:0") as ours:
            result = await in_thread(lambda: remote_run(ours.address, env_address, seeds))
    mine = episodes_of(result)
    assert [(s, n, pytest.approx(r), t, u) for s, n, r, t, u in mine] == local_episodes(
        make, policy, seeds
    )
