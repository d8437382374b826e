"""LocalModel: a policy as a RuntimeModel in process, driven against a real CartPole."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trio

from rlmesh_trio import ModelRpcError, spaces
from rlmesh_trio._endpoints import Reply, RuntimeModel
from rlmesh_trio._protocol import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, core_pb, model_pb
from rlmesh_trio.inprocess._demo_policy import (
    CARTPOLE_POLICY,
    cartpole_policy,
    cartpole_policy_batch,
)
from rlmesh_trio.inprocess._local_model import LocalModel

ENV = gym.make("CartPole-v1")
SPEC = core_pb.EnvSpec(
    id="CartPole-v1",
    observation_space=spaces.from_gymnasium(ENV.observation_space),
    action_space=spaces.from_gymnasium(ENV.action_space),
)


def ctx(env_id: str, request_id: str) -> Any:
    return model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=request_id)


async def resolve(model: LocalModel, env_id: str = "e1") -> None:
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=ctx(env_id, f"{env_id}:resolve_adapter"),
            env_spec=SPEC,
            selected_workflow_edition=WORKFLOW_EDITION,
            execution_horizon=1,
        )
    )


async def run_episode(model: LocalModel, seed: int, env_id: str = "e1") -> tuple[int, list[int]]:
    """Drive a real CartPole through the model the way a route does; return (steps, actions)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    actions: list[int] = []
    step = 0
    while True:
        step += 1
        request = model_pb.PredictRequest(
            context=ctx(env_id, f"{env_id}:predict:{step}"),
            observation=spaces.encode_batch(SPEC.observation_space, [obs]),
            episode_info=[model_pb.EpisodeInfo(episode_id=f"ep-{seed}", seed=seed)],
        )
        reply = await model.predict(request)
        assert reply.response.context == request.context
        (action,) = spaces.decode_batch(SPEC.action_space, reply.response.actions[0], 1)
        actions.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return step, actions


async def test_local_model_is_a_runtime_model_and_describes_itself() -> None:
    model = LocalModel(cartpole_policy)
    assert isinstance(model, RuntimeModel)
    info = await model.connect()
    assert info.editions == (WORKFLOW_EDITION,)
    assert info.has_capability(CAP_CONCURRENT_PREDICT)
    await model.aclose()


@pytest.mark.parametrize("threaded", [False, True])
async def test_demo_policy_balances_cartpole_identically_inline_and_threaded(
    threaded: bool,
) -> None:
    model = LocalModel(cartpole_policy, threaded=threaded)
    await resolve(model)
    steps, actions = await run_episode(model, seed=3)
    assert steps == 500  # the demo rule keeps the pole up for the whole episode
    reference = gym.make("CartPole-v1")
    obs, _ = reference.reset(seed=3)
    expected = []
    for _ in range(steps):
        expected.append(cartpole_policy(obs))
        obs, *_ = reference.step(expected[-1])
    assert actions == expected


def test_demo_batch_form_agrees_with_the_single_form() -> None:
    rng = np.random.default_rng(0)
    batch = rng.uniform(-0.3, 0.3, size=(64, 4)).astype(np.float32)
    assert cartpole_policy_batch(batch).tolist() == [cartpole_policy(row) for row in batch]


async def test_refusals_become_model_rpc_errors_with_code_and_recoverability() -> None:
    model = LocalModel(cartpole_policy, label="local-policy")
    with pytest.raises(ModelRpcError) as info:
        await model.resolve_adapter(
            model_pb.ResolveAdapterRequest(
                context=ctx("e1", "r"), env_spec=SPEC, selected_workflow_edition="2099.01"
            )
        )
    assert info.value.code == model_pb.ModelErrorCode.INVALID_REQUEST
    assert not info.value.recoverable
    assert info.value.component_id == "local-policy"
    assert 'workflow edition "2099.01"' in str(info.value)

    with pytest.raises(ModelRpcError, match="model env adapter was not resolved") as info:
        await model.predict(
            model_pb.PredictRequest(
                context=ctx("e1", "p"),
                observation=spaces.encode_batch(SPEC.observation_space, [np.zeros(4, np.float32)]),
                episode_info=[model_pb.EpisodeInfo(episode_id="a")],
            )
        )
    assert info.value.code == model_pb.ModelErrorCode.INTERNAL


async def test_policy_exception_carries_its_cause() -> None:
    def broken(obs: Any) -> int:
        raise KeyError("missing")

    model = LocalModel(broken)
    await resolve(model)
    with pytest.raises(ModelRpcError, match="internal error: KeyError: 'missing'") as info:
        await model.predict(
            model_pb.PredictRequest(
                context=ctx("e1", "p"),
                observation=spaces.encode_batch(SPEC.observation_space, [np.zeros(4, np.float32)]),
                episode_info=[model_pb.EpisodeInfo(episode_id="a")],
            )
        )
    assert isinstance(info.value.__cause__, KeyError)


async def test_several_routes_share_one_local_model_and_release_their_own_adapter() -> None:
    model = LocalModel(CARTPOLE_POLICY)
    await resolve(model, "e1")
    await resolve(model, "e2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_episode, model, 1, "e1")
        nursery.start_soon(run_episode, model, 2, "e2")
    await model.reset_adapter(
        model_pb.ResetAdapterRequest(context=ctx("e1", "e1:reset_adapter:9"), episode_ids=["x"])
    )
    await model.release_adapter(
        model_pb.ReleaseAdapterRequest(context=ctx("e1", "e1:release_adapter"), reason="done"),
        timeout=1.0,
    )
    assert list(model.host.adapters) == ["e2"]


async def test_grouped_predict_fuses_routes_and_isolates_failures() -> None:
    calls: list[int] = []

    def batch(obs: Any) -> Any:
        calls.append(len(obs))
        return cartpole_policy_batch(obs)

    from rlmesh_trio._modelhost import policy

    model = LocalModel(policy(cartpole_policy, batched=batch))
    await resolve(model, "e1")
    await resolve(model, "e2")
    obs = spaces.encode_batch(SPEC.observation_space, [np.array([0, 0, 0.1, 0], np.float32)])

    def request(env_id: str) -> Any:
        return model_pb.PredictRequest(
            context=ctx(env_id, f"{env_id}:predict:1"),
            observation=obs,
            episode_info=[model_pb.EpisodeInfo(episode_id="a")],
        )

    results = await model.grouped_predict([request("e1"), request("gone"), request("e2")])
    assert calls == [2]
    assert isinstance(results[1], ModelRpcError)
    assert isinstance(results[0], Reply) and isinstance(results[2], Reply)
    assert results[2].response.context.env_id == "e2"
