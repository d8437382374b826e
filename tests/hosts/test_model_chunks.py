"""Action chunks: a policy's predict_chunk answers a route with execution_horizon > 1."""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
import trio

import rlmesh_trio as rt


def rule(obs: np.ndarray) -> int:
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


class ChunkCounter:
    """The CartPole rule, with a chunk form that repeats the rule's action ``k`` times."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.single_calls = 0
        self.chunk_calls = 0

    def predict(self, obs: np.ndarray) -> int:
        self.single_calls += 1
        return rule(obs)

    def predict_chunk(self, obs: np.ndarray) -> list[int]:
        self.chunk_calls += 1
        return [rule(obs)] * self.k


def one_route(model: Any, horizon: int, steps: int = 30) -> rt.Route:
    return rt.Route(
        env=gymnasium.make("CartPole-v1"),
        model=model,
        seeds=[0],
        max_episode_steps=steps,
        execution_horizon=horizon,
    )


@pytest.mark.parametrize(("k", "horizon", "per_call"), [(5, 3, 3), (2, 5, 2), (4, 4, 4)])
async def test_a_chunk_serves_min_of_its_length_and_the_horizon(
    k: int, horizon: int, per_call: int
) -> None:
    policy = ChunkCounter(k)
    async with rt.serve_model(policy, "127.0.0.1:0") as server:
        report = await rt.run_routes([one_route(server.address, horizon)])
    steps = report.total_steps
    assert steps == 30
    assert policy.chunk_calls == math.ceil(steps / per_call)
    assert policy.single_calls == 0


async def test_horizon_one_uses_single_actions() -> None:
    policy = ChunkCounter(5)
    report = await rt.run_routes([one_route(policy, 1, steps=12)])  # in process
    assert report.total_steps == 12
    assert (policy.single_calls, policy.chunk_calls) == (12, 0)


async def test_in_process_policies_chunk_too() -> None:
    policy = rt.policy(rule, chunk=lambda obs: np.full(3, rule(obs)))
    report = await rt.run_routes([one_route(policy, 3, steps=9)])
    assert report.total_steps == 9
    assert report.episodes[0].predict_ms is not None


async def test_an_unimplemented_chunk_form_falls_back_to_single_actions() -> None:
    class BaseLike:
        """Like an rlmesh Model subclass that did not override predict_chunk."""

        calls = 0

        def predict(self, obs: np.ndarray) -> int:
            BaseLike.calls += 1
            return rule(obs)

        def predict_chunk(self, obs: np.ndarray) -> Any:
            raise NotImplementedError("this model does not emit action chunks")

    report = await rt.run_routes([one_route(BaseLike(), 4, steps=10)])
    assert report.ok and report.total_steps == 10
    assert BaseLike.calls == 10


async def test_a_chunk_without_a_leading_axis_is_a_clear_model_error() -> None:
    policy = rt.policy(rule, chunk=lambda obs: 1)
    with pytest.raises(rt.RunFailed) as info:
        await rt.run_routes([one_route(policy, 3, steps=5)])
    assert "predict_chunk returned a value without a leading chunk axis" in str(info.value)


@pytest.mark.interop
async def test_rlmesh_runtime_replays_our_chunks() -> None:
    rlmesh = pytest.importorskip("rlmesh")
    policy = ChunkCounter(4)
    async with (
        rt.serve_model(policy, "127.0.0.1:0") as server,
        rt.serve_env(gymnasium.make("CartPole-v1"), "127.0.0.1:0") as env_server,
    ):

        def remote() -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return rlmesh.run(
                    rlmesh.RemoteModel(server.address),
                    env_server.address,
                    seeds=[3],
                    max_episode_steps=20,
                    execution_horizon=4,
                )

        result = await trio.to_thread.run_sync(remote)
        theirs = [(e.seed, e.steps, e.reward) for e in result.episodes]
        calls_theirs = policy.chunk_calls
        ours = await rt.run_routes(
            [
                rt.Route(
                    env=gymnasium.make("CartPole-v1"),
                    model=server.address,
                    seeds=[3],
                    max_episode_steps=20,
                    execution_horizon=4,
                )
            ]
        )
    assert theirs == [(e.seed, e.steps, e.reward) for e in ours.episodes]
    steps = result.episodes[0].steps
    assert calls_theirs == math.ceil(steps / 4)
    assert policy.chunk_calls == 2 * calls_theirs
