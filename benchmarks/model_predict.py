"""What one predict costs on the model side, with no transport in the way.

Predicts one CartPole observation row through the built-in CartPole policy
(a ~0.3 us call) in four ways: ``LocalModel.predict`` inside an operation
watchdog (what an in-process route pays per step), ``ModelHost.predict``
with an inline invoke (what any host caller pays), ``ModelHost.handle`` on a
Join request (what a served model pays on its server thread, timing counters
included), and a 4-row predict (the general path). Use it to compare
checkouts (run it from each one a few times; a shared machine's noise is
larger than a method call)::

    python benchmarks/model_predict.py

Prints the median of 5 timed loops, in microseconds of process CPU per call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gymnasium as gym
import numpy as np
import trio

from rlmesh_trio import spaces
from rlmesh_trio._modelhost import inline_invoke
from rlmesh_trio._protocol import WORKFLOW_EDITION, core_pb, model_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.inprocess._local_model import LocalModel
from rlmesh_trio.runtime._watchdog import OperationWatchdog

CALLS = 10_000
REPEATS = 5


def cartpole_spec() -> core_pb.EnvSpec:
    env = gym.make("CartPole-v1")
    return core_pb.EnvSpec(
        id="CartPole-v1",
        observation_space=spaces.from_gymnasium(env.observation_space),
        action_space=spaces.from_gymnasium(env.action_space),
    )


def predict_request(spec: core_pb.EnvSpec, rows: int) -> model_pb.PredictRequest:
    assert spec.observation_space is not None
    observations = [np.full(4, 0.01 * row, np.float32) for row in range(rows)]
    return model_pb.PredictRequest(
        context=model_pb.AdapterContext(session_id="s", env_id="e1", request_id="r"),
        observation=spaces.encode_batch(spec.observation_space, observations),
        episode_info=[model_pb.EpisodeInfo(episode_id=f"ep{row}", seed=row) for row in range(rows)],
    )


async def per_call_us(call: Callable[[], Awaitable[Any]]) -> float:
    """Median over REPEATS loops of CALLS calls: process CPU microseconds per call."""
    loops = []
    for _ in range(REPEATS):
        started = time.process_time()
        for _ in range(CALLS):
            await call()
        loops.append((time.process_time() - started) / CALLS * 1e6)
    return statistics.median(loops)


async def main() -> None:
    spec = cartpole_spec()
    model = LocalModel(cartpole_policy)
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=model_pb.AdapterContext(session_id="s", env_id="e1", request_id="resolve"),
            env_spec=spec,
            selected_workflow_edition=WORKFLOW_EDITION,
            execution_horizon=1,
        )
    )
    one, four = predict_request(spec, 1), predict_request(spec, 4)
    join = model_pb.JoinRequest(request_id=1, predict=one)
    results: dict[str, float] = {}
    watchdog: OperationWatchdog[str] = OperationWatchdog()
    async with watchdog.guard(RuntimeError):
        watchdog.arm(trio.current_time() + 3600.0, "model.predict")
        results["LocalModel.predict (1 row, in a watchdog)"] = await per_call_us(
            lambda: model.predict(one)
        )
    host = model.host
    results["ModelHost.predict (1 row, inline)"] = await per_call_us(
        lambda: host.predict(one, inline_invoke)
    )
    results["ModelHost.handle (1 row, timed)"] = await per_call_us(
        lambda: host.handle(join, inline_invoke)
    )
    results["ModelHost.predict (4 rows, inline)"] = await per_call_us(
        lambda: host.predict(four, inline_invoke)
    )
    for name, us in results.items():
        print(f"{name:45s} {us:6.2f} us")


if __name__ == "__main__":
    trio.run(main)
