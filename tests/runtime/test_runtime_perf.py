"""Per-step overhead of the driver itself, on scripted endpoints (measured, printed, not asserted).

Run with ``pytest -s tests/runtime/test_runtime_perf.py`` to see the numbers. CPU
time (``time.process_time``) is used so other processes on the machine do not
skew the figure; nothing about speed is asserted.
"""

from __future__ import annotations

import time

import pytest

from rlmesh_trio import RouteDriver, RouteSpec
from rlmesh_trio._protocol import env_pb, model_pb
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

STEPS = 20_000


async def _fakes_alone(steps: int) -> float:
    """The floor: the same fake calls with no driver around them."""
    env, model = ScriptedEnv(episode_lengths=200), ScriptedModel()
    await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
    ctx = model_pb.AdapterContext(session_id="s", env_id="e", request_id="r")
    info = [model_pb.EpisodeInfo(episode_id="e")]
    started = time.process_time()
    for _ in range(steps):
        reply = await model.predict(model_pb.PredictRequest(context=ctx, episode_info=info))
        action = reply.response.actions[0]
        step = await env.step(env_pb.StepRequest(action=action, episode_ids=["e"]))
        if step.response.completed_episodes:
            await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
    return (time.process_time() - started) / steps


@pytest.mark.slow
async def test_driver_overhead_per_step() -> None:
    floor = await _fakes_alone(STEPS)
    env, model = ScriptedEnv(episode_lengths=200), ScriptedModel()
    spec = RouteSpec(route_id="perf", session_id="s", max_episodes=STEPS // 200)
    started = time.process_time()
    report = await RouteDriver(spec, env, model).run()
    per_step = (time.process_time() - started) / report.total_steps
    assert report.total_steps == STEPS and report.total_episodes == STEPS // 200
    print(
        f"\nfakes alone {floor * 1e6:.1f} us/step; driver + fakes {per_step * 1e6:.1f} us/step "
        f"({1 / per_step:,.0f} steps/s); driver overhead {(per_step - floor) * 1e6:.1f} us/step "
        f"(~{1 / max(per_step - floor, 1e-9):,.0f} steps/s for the driver alone)"
    )
