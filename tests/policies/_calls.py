"""Drive a model endpoint the way routes do: resolve, then one-row, multi-row and grouped predicts.

Not a test module. ``endpoint`` yields a ``LocalModel`` (in process) or a
connected ``RemoteModel`` to a real ``ModelServer`` on loopback port 0 (served).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import gymnasium as gym

from rlmesh_trio import LocalModel, RemoteModel, serve_model, spaces
from rlmesh_trio._protocol import WORKFLOW_EDITION, core_pb, model_pb


def env_spec(env: gym.Env) -> core_pb.EnvSpec:
    return core_pb.EnvSpec(
        id="test-env",
        observation_space=spaces.from_gymnasium(env.observation_space),
        action_space=spaces.from_gymnasium(env.action_space),
    )


def _ctx(env_id: str, request_id: str) -> model_pb.AdapterContext:
    return model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=request_id)


@asynccontextmanager
async def endpoint(policy: Any, where: str) -> AsyncIterator[Any]:
    """``where``: "local" (a LocalModel) or "served" (RemoteModel -> ModelServer on loopback)."""
    if where == "local":
        yield LocalModel(policy)
        return
    async with serve_model(policy, "127.0.0.1:0") as server:
        model = RemoteModel(server.address)
        try:
            await model.connect()
            yield model
        finally:
            await model.close()


async def resolve(model: Any, spec: core_pb.EnvSpec, env_ids: Sequence[str]) -> None:
    for env_id in env_ids:
        await model.resolve_adapter(
            model_pb.ResolveAdapterRequest(
                context=_ctx(env_id, f"{env_id}:resolve"),
                env_spec=spec,
                selected_workflow_edition=WORKFLOW_EDITION,
                execution_horizon=1,
            )
        )


def _request(spec: core_pb.EnvSpec, env_id: str, step: int, rows: list[Any]) -> Any:
    assert spec.observation_space is not None
    return model_pb.PredictRequest(
        context=_ctx(env_id, f"{env_id}:predict:{step}"),
        observation=spaces.encode_batch(spec.observation_space, rows),
        episode_info=[model_pb.EpisodeInfo(episode_id=f"ep-{i}") for i in range(len(rows))],
    )


def _actions(spec: core_pb.EnvSpec, response: Any, rows: int) -> list[Any]:
    return list(spaces.decode_batch(spec.action_space, response.actions[0], rows))


async def one_row_each(model: Any, spec: core_pb.EnvSpec, observations: list[Any]) -> list[Any]:
    """One predict per observation (every route's step)."""
    await resolve(model, spec, ["e0"])
    out = []
    for step, obs in enumerate(observations):
        reply = await model.predict(_request(spec, "e0", step, [obs]))
        out += _actions(spec, reply.response, 1)
    return out


async def many_rows(model: Any, spec: core_pb.EnvSpec, observations: list[Any]) -> list[Any]:
    """One predict carrying every observation as its own row (a lanes env)."""
    await resolve(model, spec, ["e0"])
    reply = await model.predict(_request(spec, "e0", 0, observations))
    return _actions(spec, reply.response, len(observations))


async def grouped(model: Any, spec: core_pb.EnvSpec, observations: list[Any]) -> list[Any]:
    """One grouped predict: each observation from its own route (what batching sends)."""
    env_ids = [f"e{i}" for i in range(len(observations))]
    await resolve(model, spec, env_ids)
    requests = [_request(spec, e, 0, [obs]) for e, obs in zip(env_ids, observations, strict=True)]
    out = []
    for result in await model.grouped_predict(requests):
        if isinstance(result, BaseException):
            raise result
        out += _actions(spec, result.response, 1)
    return out


SHAPES = {"one_row_each": one_row_each, "many_rows": many_rows, "grouped": grouped}


def observations_of(env: gym.Env, n: int, seed: int = 0) -> list[Any]:
    """``n`` observations of a real env under random actions (varied, deterministic)."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    while len(out) < n:
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
        out.append(obs)
    return out
