"""An in-process env and policy trade frame leaves (no messages) and give the same results.

A route whose env is a one-env ``LocalEnv`` and whose model is a ``LocalModel``
with a synchronous one-row policy, with no observation, action or step hook,
steps through ``predict_leaves`` / ``step_leaves``; with any other model, the
env alone steps on the action's leaves. Each test runs the same route through
the message path too (env and model behind facades that offer only the
``RuntimeEnv`` / ``RuntimeModel`` calls) and compares everything a user sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import RunFailed
from rlmesh_trio.inprocess._local_env import LocalEnv
from rlmesh_trio.inprocess._local_model import LocalModel


class CountingModel(LocalModel):
    """A LocalModel that counts the predicts answered as frame leaves."""

    def __init__(self, policy: Any, **options: Any) -> None:
        super().__init__(policy, **options)
        self.leaves_answered = 0

    async def predict_leaves(self, env_id: str, leaves: list[bytes]) -> list[bytes] | None:
        action = await super().predict_leaves(env_id, leaves)
        if action is not None:
            self.leaves_answered += 1
        return action


class MessagesOnly:
    """A LocalModel behind the RuntimeModel calls alone: the route must send messages."""

    def __init__(self, model: LocalModel) -> None:
        self._model = model
        self.label = model.label

    async def connect(self) -> Any:
        return await self._model.connect()

    async def resolve_adapter(self, request: Any) -> None:
        await self._model.resolve_adapter(request)

    async def predict(self, request: Any) -> Any:
        return await self._model.predict(request)

    async def reset_adapter(self, request: Any) -> None:
        await self._model.reset_adapter(request)

    async def release_adapter(self, request: Any, timeout: float) -> None:
        await self._model.release_adapter(request, timeout)

    async def aclose(self) -> None:
        await self._model.aclose()


class EnvMessagesOnly:
    """A LocalEnv behind the RuntimeEnv calls alone: the route must send messages."""

    def __init__(self, env: LocalEnv) -> None:
        self._env = env

    async def connect(self) -> Any:
        return await self._env.connect()

    async def configure(self, edition: str) -> None:
        await self._env.configure(edition)

    async def reset(self, request: Any) -> Any:
        return await self._env.reset(request)

    async def step(self, request: Any) -> Any:
        return await self._env.step(request)

    async def close(self, timeout: float) -> Any:
        return await self._env.close(timeout)

    async def aclose(self) -> None:
        await self._env.aclose()


class CountingEnv(LocalEnv):
    """A LocalEnv that counts the steps answered on frame leaves."""

    def __init__(self, env: Any, **options: Any) -> None:
        super().__init__(env, **options)
        self.leaves_stepped = 0

    async def step_leaves(self, action: list[bytes], timeout_ms: int) -> Any:
        answer = await super().step_leaves(action, timeout_ms)
        if answer is not None:
            self.leaves_stepped += 1
        return answer


def cartpole_lean(obs: np.ndarray) -> int:
    return 1 if obs[2] + 0.3 * obs[3] > 0 else 0


def pendulum_push(obs: np.ndarray) -> np.ndarray:
    return np.array([np.clip(-2.0 * obs[2], -2.0, 2.0)], np.float32)


def outcome(report: rt.RunReport) -> list[tuple[Any, ...]]:
    return [
        (e.index, e.seed, e.steps, e.reward, e.terminated, e.truncated, e.env_index)
        for e in sorted(report.episodes, key=lambda e: e.index)
    ]


def one_route(env: Any, model: Any, seeds: Sequence[int], **route: Any) -> rt.RunReport:
    return rt.run([rt.Route(env=env, model=model, seeds=list(seeds), **route)])


def both_ways(
    env_id: str, policy: Any, seeds: Sequence[int], **route: Any
) -> tuple[rt.RunReport, rt.RunReport, CountingModel]:
    """The same route through frame leaves and through messages; the env alone on
    leaves (the model behind its facade) must give the same episodes too."""
    leaves_model = CountingModel(policy, threaded=False)
    by_leaves = one_route(LocalEnv(gym.make(env_id), threaded=False), leaves_model, seeds, **route)
    env = CountingEnv(gym.make(env_id), threaded=False)
    model = MessagesOnly(LocalModel(policy, threaded=False))
    env_only = one_route(env, model, seeds, **route)
    assert env.leaves_stepped == env_only.total_steps > 0
    by_messages = one_route(
        EnvMessagesOnly(LocalEnv(gym.make(env_id), threaded=False)),
        MessagesOnly(LocalModel(policy, threaded=False)),
        seeds,
        **route,
    )
    assert outcome(env_only) == outcome(by_messages)
    return by_leaves, by_messages, leaves_model


def test_cartpole_same_episodes_both_ways() -> None:
    by_leaves, by_messages, model = both_ways("CartPole-v1", cartpole_lean, range(4))
    assert outcome(by_leaves) == outcome(by_messages)
    assert model.leaves_answered == by_leaves.total_steps > 0


def test_box_actions_same_episodes_both_ways() -> None:
    by_leaves, by_messages, model = both_ways("Pendulum-v1", pendulum_push, range(2))
    assert outcome(by_leaves) == outcome(by_messages)
    assert all(e.truncated and e.steps == 200 for e in by_leaves.episodes)
    assert model.leaves_answered == by_leaves.total_steps


def test_step_cap_truncates_the_same_both_ways() -> None:
    by_leaves, by_messages, model = both_ways(
        "CartPole-v1", cartpole_lean, range(3), max_episode_steps=17
    )
    assert outcome(by_leaves) == outcome(by_messages)
    assert [e.steps for e in by_leaves.episodes] == [17, 17, 17]
    assert model.leaves_answered == 3 * 17


def test_the_policy_sees_the_decoded_observation() -> None:
    seen: list[np.ndarray] = []

    def keep(obs: np.ndarray) -> int:
        seen.append(obs)
        return cartpole_lean(obs)

    both_ways("CartPole-v1", keep, [5], max_episode_steps=5)
    by_leaves, env_only, by_messages = seen[:5], seen[5:10], seen[10:]
    assert len(by_messages) == 5
    for a, b in [
        *zip(by_leaves, by_messages, strict=True),
        *zip(env_only, by_messages, strict=True),
    ]:
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape == (4,)
        assert a.flags.writeable and b.flags.writeable
        np.testing.assert_array_equal(a, b)


def failure(env_id: str, policy: Any, *, env_facade: bool, model_facade: bool) -> str:
    model = LocalModel(policy, threaded=False)
    env = LocalEnv(gym.make(env_id), threaded=False)
    route = rt.Route(
        env=EnvMessagesOnly(env) if env_facade else env,
        model=MessagesOnly(model) if model_facade else model,
        seeds=[0],
        route_id="r",
    )
    with pytest.raises(RunFailed) as caught:
        rt.run([route])
    return str(caught.value)


def out_of_range(obs: np.ndarray) -> int:
    return 7


def not_a_number(obs: np.ndarray) -> np.ndarray:
    return np.array([np.nan], np.float32)


def not_an_int(obs: np.ndarray) -> float:
    return 0.5


def raises(obs: np.ndarray) -> int:
    raise RuntimeError("the policy broke")


@pytest.mark.parametrize(
    ("env_id", "policy", "says"),
    [
        ("CartPole-v1", out_of_range, "InvalidAction"),
        ("Pendulum-v1", not_a_number, "NaN"),
        ("CartPole-v1", not_an_int, "does not fit the action space"),
        ("CartPole-v1", raises, "RuntimeError: the policy broke"),
    ],
)
def test_failures_read_the_same_both_ways(env_id: str, policy: Any, says: str) -> None:
    by_leaves = failure(env_id, policy, env_facade=False, model_facade=False)
    assert by_leaves == failure(env_id, policy, env_facade=True, model_facade=True)
    assert by_leaves == failure(env_id, policy, env_facade=False, model_facade=True)
    assert says in by_leaves


def test_a_hook_on_observations_sends_messages() -> None:
    model = CountingModel(cartpole_lean, threaded=False)
    seen: list[int] = []

    class Steps(rt.RuntimeHooks):
        async def step_completed(self, event: Any) -> None:
            seen.append(event.step)

    report = rt.run(
        [
            rt.Route(
                env=LocalEnv(gym.make("CartPole-v1"), threaded=False),
                model=model,
                seeds=[1],
                max_episode_steps=9,
            )
        ],
        hooks=Steps(),
    )
    assert report.total_steps == 9 and len(seen) == 9
    assert model.leaves_answered == 0


def test_a_threaded_policy_sends_messages() -> None:
    model = CountingModel(cartpole_lean, threaded=True)
    report = rt.run(
        [
            rt.Route(
                env=LocalEnv(gym.make("CartPole-v1"), threaded=False),
                model=model,
                seeds=[2],
                max_episode_steps=6,
            )
        ]
    )
    assert report.total_steps == 6
    assert model.leaves_answered == 0


def test_a_threaded_env_falls_back_each_step_with_the_same_episodes() -> None:
    by_messages = rt.run(
        [
            rt.Route(
                env=EnvMessagesOnly(LocalEnv(gym.make("CartPole-v1"), threaded=True)),
                model=MessagesOnly(LocalModel(cartpole_lean, threaded=False)),
                seeds=[3, 4],
            )
        ]
    )
    model = CountingModel(cartpole_lean, threaded=False)
    by_leaves = rt.run(
        [
            rt.Route(
                env=LocalEnv(gym.make("CartPole-v1"), threaded=True),
                model=model,
                seeds=[3, 4],
            )
        ]
    )
    assert outcome(by_leaves) == outcome(by_messages)
    # The policy still answers as leaves; the env step goes as a request each time.
    assert model.leaves_answered == by_leaves.total_steps


def test_a_vector_env_of_one_gives_the_same_episodes() -> None:
    def vector() -> Any:
        return gym.make_vec("CartPole-v1", num_envs=1, vectorization_mode="sync")

    env = CountingEnv(vector(), threaded=False)
    model = CountingModel(cartpole_lean, threaded=False)
    report = one_route(env, model, [6, 7], max_episode_steps=8)
    reference = one_route(
        EnvMessagesOnly(LocalEnv(vector(), threaded=False)),
        MessagesOnly(LocalModel(cartpole_lean, threaded=False)),
        [6, 7],
        max_episode_steps=8,
    )
    assert outcome(report) == outcome(reference)
    assert report.total_steps == 16
    # Served as one lane (the host's planned one-env step): it trades leaves too.
    assert env.leaves_stepped == model.leaves_answered == 16
