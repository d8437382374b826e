"""The host builds a space-aware policy once per pair of spaces; groups fuse within a pair."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import LocalModel, ModelRpcError
from rlmesh_trio._modelhost import Policy

from ._calls import env_spec, grouped, observations_of, resolve

CARTPOLE = gym.make("CartPole-v1")


class PerSpaces:
    """Answers each action space with its own batched rule; records what it built and called."""

    def __init__(self) -> None:
        self.built: list[str] = []
        self.batches: list[tuple[str, int]] = []

    def for_spaces(self, observation_space: Any, action_space: Any) -> Policy:
        label = repr(action_space)
        self.built.append(label)
        if isinstance(action_space, gym.spaces.Box):
            raise ValueError("no rule for Box actions")

        def batch(obs: Any) -> Any:
            self.batches.append((label, len(obs)))
            return np.full(len(obs), int(action_space.n) - 1, dtype=np.int64)

        return Policy(predict_batch=batch)


def _spec_with_actions(n: int) -> Any:
    env = gym.make("CartPole-v1")
    env.action_space = gym.spaces.Discrete(n)
    return env_spec(env)


async def test_built_once_per_pair_and_fused_only_within_it() -> None:
    per_spaces = PerSpaces()
    model = LocalModel(per_spaces)
    observations = observations_of(CARTPOLE, 4)
    assert await grouped(model, _spec_with_actions(2), observations) == [1, 1, 1, 1]
    assert per_spaces.built == ["Discrete(2)"]  # four adapters, one build
    assert per_spaces.batches == [("Discrete(2)", 4)]  # one fused call
    three = _spec_with_actions(3)
    await resolve(model, three, ["x0"])
    assert per_spaces.built == ["Discrete(2)", "Discrete(3)"]


async def test_spaces_the_policy_refuses_refuse_the_route() -> None:
    model = LocalModel(PerSpaces())
    with pytest.raises(ModelRpcError, match="model error: ValueError: no rule for Box actions"):
        await resolve(model, env_spec(gym.make("Pendulum-v1")), ["p0"])
