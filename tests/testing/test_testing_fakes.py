"""The public fakes behave like the protocol says an env / model endpoint does."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from rlmesh_trio import EndpointInfo, EnvRpcError, ModelRpcError, RuntimeEnv, RuntimeModel
from rlmesh_trio._protocol import CAP_SUBSET_STEP, core_pb, env_pb, model_pb, spaces_pb
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel, scripted_contract


def action(n: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[struct.pack("<q", 0) * n])


def test_fakes_implement_the_endpoint_protocols() -> None:
    assert isinstance(ScriptedEnv(), RuntimeEnv)
    assert isinstance(ScriptedModel(), RuntimeModel)


def test_scripted_contract_is_a_valid_wire_message() -> None:
    contract = scripted_contract(3, core_pb.AutoresetMode.NEXT_STEP)
    decoded = core_pb.EnvContract.parse(bytes(contract))
    assert decoded == contract and decoded.num_envs == 3
    assert decoded.spec.action_space.discrete.n == 2
    assert list(decoded.spec.observation_space.shape) == [2]


async def test_connect_reports_capabilities_by_flavour() -> None:
    lanes = await ScriptedEnv(num_envs=2).connect()
    vector = await ScriptedEnv(num_envs=2, autoreset="next_step").connect()
    assert isinstance(lanes, EndpointInfo) and lanes.has_capability(CAP_SUBSET_STEP)
    assert not vector.has_capability(CAP_SUBSET_STEP)
    assert vector.contract is not None
    assert vector.contract.autoreset_mode == core_pb.AutoresetMode.NEXT_STEP
    assert lanes.editions == ("2026.06",) and lanes.preferred_edition == "2026.06"


async def test_disabled_env_completes_and_reports_interrupted_episodes() -> None:
    env = ScriptedEnv(episode_lengths=2, rewards=[0.5, 2.0], final_info={"is_success": True})
    await env.reset(env_pb.ResetRequest(seeds=[7], episode_ids=["e1"]))
    first = (await env.step(env_pb.StepRequest(action=action(1), episode_ids=["e1"]))).response
    assert first.rewards == [0.5] and first.terminated_mask == b"\x00"
    done = (await env.step(env_pb.StepRequest(action=action(1), episode_ids=["e1"]))).response
    (meta,) = done.completed_episodes
    assert (meta.episode_id, meta.seed, meta.step_count, meta.cumulative_reward) == (
        "e1",
        7,
        2,
        2.5,
    )
    assert meta.terminated and not meta.truncated and meta.final_info is not None
    assert meta.end_timestamp_ns >= meta.start_timestamp_ns > 0
    # Stepping a finished DISABLED env: done again, reward 0, nothing completed.
    after = (await env.step(env_pb.StepRequest(action=action(1)))).response
    assert after.terminated_mask == b"\x01" and after.rewards == [0.0]
    assert not after.completed_episodes
    # A reset over a running episode makes it interrupted, reported on the next step.
    await env.reset(env_pb.ResetRequest(episode_ids=["e2"]))
    await env.step(env_pb.StepRequest(action=action(1)))
    await env.reset(env_pb.ResetRequest(episode_ids=["e3"]))
    nxt = (await env.step(env_pb.StepRequest(action=action(1)))).response
    (interrupted,) = nxt.completed_episodes
    assert interrupted.episode_id == "e2" and interrupted.truncated and interrupted.seed is None
    # The response is a valid wire message.
    assert env_pb.StepResponse.parse(bytes(nxt)) == nxt


async def test_next_step_env_rolls_lanes_with_the_pushed_id() -> None:
    env = ScriptedEnv(num_envs=2, autoreset="next_step", episode_lengths=[1, 3, 3, 9])
    reset = await env.reset(env_pb.ResetRequest(episode_ids=["a", "b"]))
    assert len(reset.response.observation.leaves[0]) == 2 * 8
    step1 = (await env.step(env_pb.StepRequest(action=action(2), episode_ids=["a", "b"]))).response
    assert [m.episode_id for m in step1.completed_episodes] == ["a"]
    roll = (await env.step(env_pb.StepRequest(action=action(2), episode_ids=["c", "b"]))).response
    assert roll.rewards == [0.0, 1.0] and roll.terminated_mask == b"\x00\x00"
    # Lane 0 restarted under "c" (length 3 from the script); its roll step is not counted.
    done = []
    ids = ["c", "b"]
    for _ in range(3):
        step = (await env.step(env_pb.StepRequest(action=action(2), episode_ids=ids))).response
        done += [(m.episode_id, m.step_count) for m in step.completed_episodes]
        ids = ["c", "d"]
    assert done == [("b", 3), ("c", 3)]


async def test_lane_env_steps_one_lane_and_echoes_indices() -> None:
    env = ScriptedEnv(num_envs=3, episode_lengths=2)
    reset = await env.reset(env_pb.ResetRequest(env_indices=[2], seeds=[9], episode_ids=["z"]))
    assert reset.response.observation.leaves == [struct.pack("<2f", 2.0, 0.0)]
    step = await env.step(env_pb.StepRequest(action=action(1), env_indices=[2], episode_ids=["z"]))
    assert step.response.env_indices == [2] and step.response.rewards == [1.0]


async def test_env_failures_and_delays(autojump_clock: trio.testing.MockClock) -> None:
    env = ScriptedEnv(fail_at={"reset": 2}, delays={"reset": 1.5})
    await env.reset(env_pb.ResetRequest())
    assert trio.current_time() == pytest.approx(1.5)
    with pytest.raises(EnvRpcError, match="injected failure at reset call 2"):
        await env.reset(env_pb.ResetRequest())
    hanging = ScriptedEnv(fail_at={"step": 1}, failure="hang")
    with trio.move_on_after(100) as scope:
        await hanging.step(env_pb.StepRequest(action=action(1)))
    assert scope.cancelled_caught
    with pytest.raises(ValueError, match="failure must be"):
        ScriptedEnv(failure="explode")


async def test_env_close_returns_active_episodes_truncated() -> None:
    env = ScriptedEnv(num_envs=2, episode_lengths=5)
    await env.reset(env_pb.ResetRequest(episode_ids=["a", "b"]))
    final = await env.close(1.0)
    assert [(m.episode_id, m.truncated, m.env_index) for m in final] == [
        ("a", True, 0),
        ("b", True, 1),
    ]
    assert env.closes == [1.0]


async def test_model_answers_one_row_per_episode_and_copies_the_context() -> None:
    model = ScriptedModel(action=1, frames=2, telemetry={"endpoint.total": 0.1})
    ctx = model_pb.AdapterContext(
        session_id="s", env_id="e", request_id="e:step_observation:000001"
    )
    request = model_pb.PredictRequest(
        context=ctx,
        episode_info=[model_pb.EpisodeInfo(episode_id="a"), model_pb.EpisodeInfo(episode_id="b")],
    )
    reply = await model.predict(request)
    assert reply.response.context == ctx and reply.response.context is not ctx
    assert len(reply.response.actions) == 2
    assert reply.response.actions[0].leaves == [struct.pack("<q", 1) * 2]
    assert reply.telemetry == {"endpoint.total": 0.1}
    assert model_pb.PredictResponse.parse(bytes(reply.response)) == reply.response


async def test_model_scripted_faults(autojump_clock: trio.testing.MockClock) -> None:
    ctx = model_pb.AdapterContext(session_id="s", env_id="e", request_id="r")
    request = model_pb.PredictRequest(context=ctx, episode_info=[model_pb.EpisodeInfo("a")])
    model = ScriptedModel(wrong_context_at=1, empty_actions_at=2, fail_at={"predict": 3})
    assert (await model.predict(request)).response.context.env_id == "e-other"
    assert (await model.predict(request)).response.actions == []
    with pytest.raises(ModelRpcError, match="injected failure at predict call 3"):
        await model.predict(request)
    stuck = ScriptedModel(release_hangs=True)
    with trio.move_on_after(10) as scope:
        await stuck.release_adapter(model_pb.ReleaseAdapterRequest(context=ctx), 1.0)
    assert scope.cancelled_caught and len(stuck.releases) == 1
    with pytest.raises(ValueError, match="frames must be"):
        ScriptedModel(frames=0)


def test_recording_hooks_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown hook event"):
        RecordingHooks(fail_events={"nope"})
    with pytest.raises(ValueError, match="unknown transform"):
        RecordingHooks(fail_transform="transform_reward")
