"""The route loop on scripted endpoints: single env, NEXT_STEP vector env, lanes."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
import trio
import trio.testing

from rlmesh_trio import (
    HandshakeError,
    InvalidSpec,
    ProtocolError,
    RouteDriver,
    RouteReport,
    RouteSpec,
)
from rlmesh_trio._protocol import core_pb
from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel, scripted_contract


def make_spec(**kwargs: Any) -> RouteSpec:
    kwargs.setdefault("route_id", "r0")
    kwargs.setdefault("session_id", "sess")
    kwargs.setdefault("env_id", "env-1")
    return RouteSpec(**kwargs)


async def run(
    env: ScriptedEnv, model: ScriptedModel, hooks: RecordingHooks | None = None, **kwargs: Any
) -> RouteReport:
    return await RouteDriver(make_spec(**kwargs), env, model, hooks).run()


async def test_single_env_runs_episodes_with_runtime_minted_ids() -> None:
    env, model = ScriptedEnv(episode_lengths=4), ScriptedModel()
    report = await run(env, model, max_episodes=3)

    assert (report.total_episodes, report.total_steps) == (3, 12)
    assert env.configured == "2026.06"
    assert env.calls == ["connect", "configure"] + (["reset"] + ["step"] * 4) * 3
    # One reset per episode, each with one fresh UUIDv7 and the reset timeout; no lanes.
    ids = [r.episode_ids[0] for r in env.resets]
    assert len(set(ids)) == 3 and all(uuid.UUID(i).version == 7 for i in ids)
    assert all(r.timeout_ms == 300_000 and not r.env_indices and not r.seeds for r in env.resets)
    assert all(s.timeout_ms == 300_000 and not s.env_indices for s in env.steps)
    assert [s.episode_ids for s in env.steps[:4]] == [[ids[0]]] * 4
    assert [s.episode_ids for s in env.steps[4:8]] == [[ids[1]]] * 4

    assert [e.episode_id for e in report.episodes] == ids
    first = report.episodes[0]
    assert (first.index, first.record_id, first.env_index, first.seed) == (0, "ep-000001", 0, None)
    assert (first.steps, first.reward, first.terminated, first.truncated) == (4, 4.0, True, False)
    assert first.success is None and first.duration_s >= 0
    assert [e.record_id for e in report.episodes] == ["ep-000001", "ep-000002", "ep-000003"]

    # Model: resolve, then predicts whose request ids follow <env_id>:<phase>:<seq:06>.
    (resolve,) = model.resolves
    assert resolve.context.request_id == "env-1:resolve_adapter:000001"
    assert resolve.context.session_id == "sess" and resolve.context.env_id == "env-1"
    assert resolve.selected_workflow_edition == "2026.06" and resolve.execution_horizon == 1
    assert resolve.env_spec == env.contract.spec
    first_predict = model.predicts[0]
    assert first_predict.context.request_id == "env-1:reset_observation:000002"
    assert model.predicts[1].context.request_id == "env-1:step_observation:000003"
    assert [i.episode_id for i in first_predict.episode_info] == [ids[0]]
    # Best-effort ResetAdapter per finished episode, then the release.
    assert sorted(r.episode_ids[0] for r in model.resets) == sorted(ids)
    assert all(":reset_adapter:" in r.context.request_id for r in model.resets)
    (release, timeout) = model.releases[0]
    assert release.reason == "completed requested episodes" and timeout == 5.0
    assert release.context.request_id.startswith("env-1:release_adapter:")
    assert env.closes == [] and not env.aclosed and not model.aclosed

    as_dict = report.to_dict()
    assert as_dict["total_episodes"] == 3 and as_dict["episodes"][0]["record_id"] == "ep-000001"


async def test_seeds_are_claimed_in_episode_start_order() -> None:
    env, model = ScriptedEnv(episode_lengths=2), ScriptedModel()
    report = await run(env, model, seeds=(11, 12, 13))
    assert report.total_episodes == 3
    assert [r.seeds for r in env.resets] == [[11], [12], [13]]
    assert [e.seed for e in report.episodes] == [11, 12, 13]
    assert {(p.episode_info[0].seed) for p in model.predicts[:2]} == {11}


async def test_success_comes_from_final_info() -> None:
    report = await run(
        ScriptedEnv(episode_lengths=1, final_info={"success": 0, "is_success": True}),
        ScriptedModel(),
        max_episodes=1,
    )
    assert report.episodes[0].success is True
    report = await run(
        ScriptedEnv(episode_lengths=1, final_info={"task_success": 0.0}),
        ScriptedModel(),
        max_episodes=1,
    )
    assert report.episodes[0].success is False


async def test_runtime_truncates_at_max_episode_steps_and_drops_the_interrupted_echo() -> None:
    env, model, hooks = ScriptedEnv(episode_lengths=100), ScriptedModel(), RecordingHooks()
    report = await run(env, model, hooks, max_episodes=2, max_episode_steps=3)
    assert report.total_steps == 6
    assert [(e.steps, e.terminated, e.truncated, e.reward) for e in report.episodes] == [
        (3, False, True, 3.0),
        (3, False, True, 3.0),
    ]
    # The env reports the first episode as interrupted on the next step: stale, dropped.
    stale = [e.message for e in hooks.of("log") if "stale" in e.message]
    assert stale and report.episodes[0].episode_id in stale[0]


async def test_stale_completions_are_ignored_and_logged() -> None:
    env, hooks = ScriptedEnv(episode_lengths=2, stale_completions=True), RecordingHooks()
    report = await run(env, ScriptedModel(), hooks, max_episodes=3)
    assert report.total_episodes == 3 and report.total_steps == 6
    assert all(not e.episode_id.startswith("stale") for e in report.episodes)
    logs = [e.message for e in hooks.of("log") if "dropping a stale" in e.message]
    assert len(logs) >= 2 and "stale-1" in logs[0]


async def test_next_step_vector_env_rolls_new_ids_into_the_next_step() -> None:
    env = ScriptedEnv(num_envs=2, autoreset="next_step", episode_lengths=[2, 3])
    model = ScriptedModel()
    report = await run(env, model, max_episodes=3)

    # One whole-width reset, never another; every step is whole width.
    assert len(env.resets) == 1 and len(env.resets[0].episode_ids) == 2
    a0, b0 = env.resets[0].episode_ids
    assert all(len(s.episode_ids) == 2 and not s.env_indices for s in env.steps)
    assert env.steps[0].episode_ids == [a0, b0]
    assert env.steps[1].episode_ids == [a0, b0]
    # Lane 0 completed at step 2: step 3 (its roll step) carries a new id in position 0 only.
    a1 = env.steps[2].episode_ids[0]
    assert a1 != a0 and env.steps[2].episode_ids[1] == b0
    assert report.episodes[0].episode_id == a0 and report.episodes[0].steps == 2
    assert report.episodes[1].episode_id == b0 and report.episodes[1].steps == 3
    # The roll step counts for neither episode: lane 0's second episode (length 2) ends
    # two action steps after its roll step.
    assert report.episodes[2].episode_id == a1 and report.episodes[2].steps == 2
    assert report.total_steps == 5 and report.total_episodes == 3
    # Predicts cover both lanes, the episode_info in lane order.
    assert [i.episode_id for i in model.predicts[2].episode_info] == [a1, b0]


async def test_max_episodes_stops_exactly_when_lanes_complete_together() -> None:
    env = ScriptedEnv(num_envs=3, autoreset="next_step", episode_lengths=2)
    report = await run(env, ScriptedModel(), max_episodes=2)
    assert report.total_episodes == 2 and report.total_steps == 2
    assert [e.env_index for e in report.episodes] == [0, 1]


async def test_lanes_reset_and_step_each_lane_on_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env = ScriptedEnv(num_envs=3, episode_lengths=[2, 3, 4], delays={"step": 0.1})
    model = ScriptedModel()
    report = await run(env, model, seeds=(5, 6, 7, 8, 9))

    assert report.total_episodes == 5
    # Never more episodes started than the budget, one reset per episode, per lane.
    assert env.episodes_started == 5 and len(env.resets) == 5
    assert all(len(r.env_indices) == 1 and len(r.episode_ids) == 1 for r in env.resets)
    # Lane k's first episode gets the k-th seed (the per-lane resets go out in any order);
    # later resets take the next unused seed.
    assert sorted((r.env_indices[0], r.seeds[0]) for r in env.resets[:3]) == [
        (0, 5),
        (1, 6),
        (2, 7),
    ]
    assert [r.seeds[0] for r in env.resets[3:]] == [8, 9]
    assert all(len(s.env_indices) == 1 and len(s.episode_ids) == 1 for s in env.steps)
    # Each step names its lane's current episode.
    current = {}
    for call in env.resets:
        current.setdefault(call.env_indices[0], set()).add(call.episode_ids[0])
    assert all(s.episode_ids[0] in current[s.env_indices[0]] for s in env.steps)
    assert all(len(p.episode_info) == 1 for p in model.predicts)
    assert sorted(e.seed for e in report.episodes) == [5, 6, 7, 8, 9]
    # Lanes run concurrently: 3 lanes x 0.1 s steps overlap (total steps 2+3+4+2+3 = 14).
    assert report.total_steps == 14
    assert trio.current_time() < 14 * 0.1


async def test_lane_env_with_one_lane_is_driven_whole_width() -> None:
    env = ScriptedEnv(num_envs=1, subset_step=True, episode_lengths=2)
    await run(env, ScriptedModel(), max_episodes=2)
    assert all(not r.env_indices for r in env.resets)
    assert all(not s.env_indices for s in env.steps)


async def test_action_frames_are_replayed_and_flushed_on_completion() -> None:
    env, model = ScriptedEnv(episode_lengths=5), ScriptedModel(frames=3)
    report = await run(env, model, max_episodes=2, execution_horizon=3)
    assert model.resolves[0].execution_horizon == 3
    # Per episode: predict at step 1 (frames for steps 1..3), at step 4 (4..6); the
    # leftover frame is dropped when the episode completes.
    assert len(model.predicts) == 4 and report.total_steps == 10
    assert model.predicts[2].context.request_id.split(":")[1] == "reset_observation"


@pytest.mark.parametrize("close_env_on_end", [True, False])
async def test_close_env_on_end(close_env_on_end: bool) -> None:
    env = ScriptedEnv(episode_lengths=2)
    await run(env, ScriptedModel(), max_episodes=1, close_env_on_end=close_env_on_end)
    assert env.closes == ([5.0] if close_env_on_end else [])
    assert ("close" in env.calls) is close_env_on_end
    assert not env.aclosed


async def test_edition_mismatch_fails_before_configure() -> None:
    env = ScriptedEnv(editions=("2099.01",), preferred_edition=None)
    model = ScriptedModel()
    driver = RouteDriver(make_spec(max_episodes=1), env, model)
    with pytest.raises(HandshakeError) as info:
        await driver.run()
    assert str(info.value) == (
        "handshake with scripted-env failed: no mutual workflow edition across env, model, "
        'and runtime: env declares no edition and can ["2099.01"]; model wants "2026.06" and '
        'can ["2026.06"]; runtime wants "2026.06" and can ["2026.06"]'
    )
    assert env.calls == ["connect"] and env.configured is None
    assert model.resolves == [] and model.releases == []
    assert driver.error is info.value


async def test_model_want_above_runtime_is_no_limit() -> None:
    env = ScriptedEnv(episode_lengths=1)
    model = ScriptedModel(editions=("2026.06", "2099.01"), preferred_edition="2099.01")
    await run(env, model, max_episodes=1)
    assert env.configured == "2026.06"


def _contract(mode: int, num_envs: int = 1) -> core_pb.EnvContract:
    contract = scripted_contract(num_envs)
    contract.autoreset_mode = core_pb.AutoresetMode(mode)
    return contract


@pytest.mark.parametrize(
    ("env_kwargs", "spec_kwargs", "error", "message"),
    [
        (
            {"contract": _contract(2)},
            {},
            InvalidSpec,
            "invalid runtime session spec: SAME_STEP autoreset is reserved but not yet "
            "supported by the runtime; construct the env with NEXT_STEP or DISABLED autoreset",
        ),
        (
            {"contract": _contract(7)},
            {},
            ProtocolError,
            "protocol error: invalid spaces spec from env: decode error: unknown autoreset mode 7",
        ),
        (
            {"num_envs": 2, "subset_step": False},
            {},
            InvalidSpec,
            "invalid runtime session spec: vectorized runtime sessions (num_envs > 1) require "
            "NEXT_STEP autoreset unless the env steps lanes individually (the `subset_step` "
            "capability)",
        ),
        (
            {"contract": _contract(0, num_envs=2), "subset_step": False},
            {},
            InvalidSpec,
            "invalid runtime session spec: vectorized runtime sessions (num_envs > 1)",
        ),
        (
            {"autoreset": "next_step"},
            {"seeds": (1,)},
            InvalidSpec,
            "invalid runtime session spec: episode_seeds requires an env with autoreset disabled",
        ),
        (
            {"autoreset": "next_step"},
            {"max_episode_steps": 5},
            InvalidSpec,
            "invalid runtime session spec: max_episode_steps / max_episode_seconds require an "
            "env with autoreset disabled",
        ),
        (
            {"num_envs": 2},
            {"num_envs": 3},
            InvalidSpec,
            "invalid runtime session spec: num_envs=3 does not match the env contract",
        ),
    ],
)
async def test_contract_and_autoreset_validation(
    env_kwargs: dict[str, Any], spec_kwargs: dict[str, Any], error: type, message: str
) -> None:
    env = ScriptedEnv(**env_kwargs)
    with pytest.raises(error) as info:
        await run(env, ScriptedModel(), max_episodes=1, **spec_kwargs)
    assert str(info.value).startswith(message)
    assert env.configured is None and "reset" not in env.calls


async def test_unspecified_autoreset_is_driven_like_disabled() -> None:
    env = ScriptedEnv(contract=_contract(0), episode_lengths=2)
    report = await run(env, ScriptedModel(), max_episodes=2)
    assert report.total_episodes == 2 and len(env.resets) == 2


async def test_spec_contract_overrides_the_handshake() -> None:
    env = ScriptedEnv(episode_lengths=2)
    spec_contract = scripted_contract(env_name="Override-v1")
    model = ScriptedModel()
    await run(env, model, max_episodes=1, contract=spec_contract)
    assert model.resolves[0].env_spec.id == "Override-v1"


async def test_observations_and_actions_pass_through_untouched() -> None:
    env, model = ScriptedEnv(episode_lengths=3), ScriptedModel(action=1)
    await run(env, model, max_episodes=1)
    # The first predict carries the reset observation [env_index=0, step=0].
    assert model.predicts[0].observation.leaves == [struct.pack("<2f", 0.0, 0.0)]
    assert model.predicts[1].observation.leaves == [struct.pack("<2f", 0.0, 1.0)]
    assert env.steps[0].action.leaves == [struct.pack("<q", 1)]


async def test_report_is_available_while_running(autojump_clock: trio.testing.MockClock) -> None:
    env = ScriptedEnv(episode_lengths=2, delays={"step": 1.0})
    driver = RouteDriver(make_spec(max_episodes=3), env, ScriptedModel())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        await trio.sleep(2.5)
        partial = driver.report()
        assert partial.total_episodes == 1 and driver.step == 2
    assert driver.report().total_episodes == 3 and driver.error is None


async def test_a_driver_runs_once() -> None:
    driver = RouteDriver(make_spec(max_episodes=1), ScriptedEnv(episode_lengths=1), ScriptedModel())
    await driver.run()
    with pytest.raises(RuntimeError, match="runs once"):
        await driver.run()


async def test_max_episode_seconds_truncates_on_the_runs_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    env = ScriptedEnv(episode_lengths=1000, delays={"step": 1.0})
    spec = RouteSpec(route_id="timed", session_id="s", max_episodes=3, max_episode_seconds=4.5)
    report = await RouteDriver(spec, env, ScriptedModel()).run()
    assert [(ep.steps, ep.truncated, ep.terminated) for ep in report.episodes] == [
        (5, True, False)
    ] * 3


async def test_max_episode_seconds_is_refused_for_next_step_envs() -> None:
    env = ScriptedEnv(num_envs=2, autoreset="next_step")
    spec = RouteSpec(route_id="timed", session_id="s", max_episodes=2, max_episode_seconds=1.0)
    with pytest.raises(InvalidSpec, match="max_episode_steps / max_episode_seconds require"):
        await RouteDriver(spec, env, ScriptedModel()).run()


def test_max_episode_seconds_must_be_positive() -> None:
    with pytest.raises(InvalidSpec, match="max_episode_seconds must be a positive number"):
        RouteSpec(route_id="r", session_id="s", max_episode_seconds=0).validate()
