"""LocalModel's one-row predicts (the host's planned path) on every placement and failure."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import ModelRpcError, spaces
from rlmesh_trio._protocol import WORKFLOW_EDITION, core_pb, model_pb, spaces_pb
from rlmesh_trio.inprocess._local_model import LocalModel

CARTPOLE = gym.make("CartPole-v1")
SPEC = core_pb.EnvSpec(
    id="CartPole-v1",
    observation_space=spaces.from_gymnasium(CARTPOLE.observation_space),
    action_space=spaces.from_gymnasium(CARTPOLE.action_space),
)
assert SPEC.observation_space is not None and SPEC.action_space is not None
OBS_SPEC: spaces_pb.SpaceSpec = SPEC.observation_space
ACT_SPEC: spaces_pb.SpaceSpec = SPEC.action_space


def context() -> model_pb.AdapterContext:
    return model_pb.AdapterContext(session_id="s", env_id="e1", request_id="e1:predict:1")


async def resolved(fn: Any, **options: Any) -> LocalModel:
    model = LocalModel(fn, **options)
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=model_pb.AdapterContext(session_id="s", env_id="e1", request_id="r"),
            env_spec=SPEC,
            selected_workflow_edition=WORKFLOW_EDITION,
            execution_horizon=1,
        )
    )
    return model


def one_row(theta: float) -> model_pb.PredictRequest:
    obs = np.array([0.0, 0.0, theta, 0.0], np.float32)
    return model_pb.PredictRequest(
        context=context(),
        observation=spaces.encode_batch(OBS_SPEC, [obs]),
        episode_info=[model_pb.EpisodeInfo(episode_id="ep", seed=1)],
    )


def lean(obs: np.ndarray) -> int:
    return 1 if obs[2] > 0 else 0


async def lean_async(obs: np.ndarray) -> int:
    return lean(obs)


@pytest.mark.parametrize(
    ("fn", "options"),
    [(lean, {}), (lean, {"threaded": True}), (lean, {"threaded": False}), (lean_async, {})],
    ids=["adaptive", "threaded", "inline", "async"],
)
async def test_every_placement_answers_the_same_frames(fn: Any, options: dict[str, Any]) -> None:
    model = await resolved(fn, **options)
    for theta, action in ((0.1, 1), (-0.1, 0)):
        request = one_row(theta)
        reply = await model.predict(request)
        assert reply.response.context is request.context
        assert reply.response.actions == [spaces.encode_batch(ACT_SPEC, [action])]


async def test_a_threaded_policy_runs_off_the_trio_thread() -> None:
    seen: list[int] = []

    def where(obs: np.ndarray) -> int:
        seen.append(threading.get_ident())
        return 0

    model = await resolved(where, threaded=True)
    await model.predict(one_row(0.1))
    assert seen and seen[0] != threading.get_ident()


async def test_a_policy_error_keeps_its_exception_as_the_cause() -> None:
    boom = ValueError("no weights loaded")

    def broken(obs: np.ndarray) -> int:
        raise boom

    model = await resolved(broken)
    with pytest.raises(ModelRpcError) as info:
        await model.predict(one_row(0.1))
    assert info.value.message == "internal error: ValueError: no weights loaded"
    assert info.value.code == int(model_pb.ModelErrorCode.INTERNAL)
    assert info.value.__cause__ is boom


async def test_an_action_outside_the_wire_dtype_is_refused_with_the_codec_message() -> None:
    model = await resolved(lambda obs: 2**70)
    with pytest.raises(ModelRpcError) as info:
        await model.predict(one_row(0.1))
    assert info.value.message.startswith(
        "internal error: model error: the policy returned an action that does not fit "
        "the action space: "
    )
    assert "$" in info.value.message  # the codec names the leaf path


async def test_a_short_observation_is_refused_with_the_codec_message() -> None:
    model = await resolved(lean)
    request = one_row(0.1)
    assert request.observation is not None
    request.observation = spaces_pb.SpaceValue(leaves=[request.observation.leaves[0][:-4]])
    with pytest.raises(ModelRpcError) as info:
        await model.predict(request)
    assert info.value.message == (
        "internal error: model error: $: length mismatch: slab: got 12 bytes, expected 1 lanes * 16"
    )
