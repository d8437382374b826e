"""A fused group's call is judged inline-worthy per row: it stands for that many single calls."""

from __future__ import annotations

import threading
import time

import gymnasium as gym
import numpy as np

import rlmesh_trio as rt
from rlmesh_trio import LocalModel, spaces
from rlmesh_trio._protocol import WORKFLOW_EDITION, core_pb, model_pb
from rlmesh_trio.runtime._placement import CallPlacement

CPU_BURN = 0.003  # seconds of this thread's CPU per call: past a 1 ms limit for one row


def _burn() -> bool:
    started = time.thread_time()
    while time.thread_time() - started < CPU_BURN:
        pass
    return threading.current_thread() is threading.main_thread()


async def test_a_call_of_many_rows_is_judged_against_the_limit_times_its_rows() -> None:
    placement = CallPlacement(inline_limit=0.001, start_inline=True)
    for _ in range(4):
        assert await placement.run(_burn, rows=100) is True  # 3 ms for 100 rows: cheap
    assert placement.inline
    await placement.run(_burn)
    await placement.run(_burn)  # two slow single calls in a row: back to threads
    assert not placement.inline


async def test_a_local_models_grouped_predicts_stay_inline() -> None:
    env = gym.make("CartPole-v1")
    spec = core_pb.EnvSpec(
        id="CartPole-v1",
        observation_space=spaces.from_gymnasium(env.observation_space),
        action_space=spaces.from_gymnasium(env.action_space),
    )
    assert spec.observation_space is not None
    threads: list[bool] = []

    def batch(obs: np.ndarray) -> np.ndarray:
        threads.append(not _burn())
        return np.zeros(len(obs), np.int64)

    model = LocalModel(rt.policy(batched=batch), inline_limit=0.001)
    requests = []
    for i in range(32):
        context = model_pb.AdapterContext(session_id="s", env_id=f"e{i}", request_id=f"r{i}")
        await model.resolve_adapter(
            model_pb.ResolveAdapterRequest(
                context=context, env_spec=spec, selected_workflow_edition=WORKFLOW_EDITION
            )
        )
        requests.append(
            model_pb.PredictRequest(
                context=context,
                observation=spaces.encode_batch(spec.observation_space, [np.zeros(4, np.float32)]),
                episode_info=[model_pb.EpisodeInfo(episode_id=f"ep{i}")],
            )
        )
    for _ in range(4):
        results = await model.grouped_predict(requests)
        assert all(isinstance(r, rt.Reply) for r in results)
    assert threads == [False] * 4 and model.placement.inline
