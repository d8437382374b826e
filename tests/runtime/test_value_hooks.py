"""``rt.hooks.ValueTransform``: transform hooks on the values gymnasium users hold."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio.hooks import ValueTransform


class ActionLog(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole that remembers the actions it was given."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.actions: list[Any] = []

    def step(self, action: Any) -> Any:
        self.actions.append(action)
        return super().step(action)


def test_hooks_get_and_return_numpy_values() -> None:
    seen: dict[str, list[Any]] = {"obs": [], "model": [], "action": []}

    def policy(obs: Any) -> int:
        seen["model"].append(obs)
        return 0

    def zero_obs(obs: Any, event: Any) -> Any:
        seen["obs"].append(obs)
        return np.zeros_like(obs)

    def push_right(action: Any, event: Any) -> Any:
        seen["action"].append(action)
        return 1

    env = ActionLog()
    hooks = ValueTransform(observation=zero_obs, action=push_right)
    report = rt.run([rt.Route(env=env, model=policy, seeds=[3], hooks=hooks)])
    assert report.routes[0].status == "completed"
    assert all(isinstance(o, np.ndarray) and o.shape == (4,) for o in seen["obs"])
    assert all(o.dtype == np.float32 for o in seen["obs"])
    assert all(not np.any(o) for o in seen["model"])  # the model saw our zeros
    assert seen["action"] and all(type(a) is int and a == 0 for a in seen["action"])
    assert env.actions and all(int(a) == 1 for a in env.actions)  # the env saw ours


def test_a_subclass_overrides_one_side_async() -> None:
    class Flip(ValueTransform):
        async def action(self, value: Any, event: Any) -> Any:
            return 1 - value

    env = ActionLog()
    rt.run([rt.Route(env=env, model=lambda obs: 0, seeds=[1], hooks=Flip())])
    assert env.actions and all(int(a) == 1 for a in env.actions)


def test_a_value_that_does_not_fit_the_space_fails_the_route() -> None:
    hooks = ValueTransform(action=lambda action, event: "left")
    route = rt.Route(env=gym.make("CartPole-v1"), model=lambda obs: 0, seeds=[1], hooks=hooks)
    with pytest.raises(rt.RunFailed) as info:
        rt.run([route])
    assert isinstance(info.value.report.routes[0].error, rt.HookError)


def test_slab_transforms_keep_their_spacevalue_form() -> None:
    seen: list[Any] = []

    class Slab(rt.RuntimeHooks):
        async def transform_observation(self, event: Any) -> Any:
            seen.append(event.observation)
            return None

    rt.run([rt.Route(env=gym.make("CartPole-v1"), model=lambda o: 0, seeds=[1], hooks=Slab())])
    assert seen and all(isinstance(v, rt.spaces.SpaceValue) for v in seen)


def test_a_vector_env_gives_batches_as_gymnasium_does() -> None:
    shapes: list[tuple[int, ...]] = []
    actions: list[Any] = []

    def observe(obs: Any, event: Any) -> None:
        shapes.append(obs.shape)

    def act(action: Any, event: Any) -> Any:
        actions.append(action)
        return np.ones_like(action)

    vector = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    hooks = ValueTransform(observation=observe, action=act)
    report = rt.run([rt.Route(env=vector, model=lambda obs: 0, episodes=4, hooks=hooks)])
    assert report.total_episodes == 4
    assert shapes and all(s == (2, 4) for s in shapes)
    assert actions and all(isinstance(a, np.ndarray) and a.shape == (2,) for a in actions)


def test_the_guide_example_runs() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "hooks.md"
    first = re.findall(r"```python\n(.*?)```", guide.read_text(), re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(first, str(guide), "exec"), namespace)
    assert namespace["report"].total_episodes == 5
