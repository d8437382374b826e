"""Hooks: event order and content, best-effort events, transforms, HookChain."""

from __future__ import annotations

import struct
from typing import Any

import attrs
import pytest

from rlmesh_trio import HookChain, RouteDriver, RouteSpec, RuntimeHooks
from rlmesh_trio._protocol import spaces_pb
from rlmesh_trio.hooks.events import ObservationEmittedEvent, RouteContext
from rlmesh_trio.runtime._hooks import overrides
from rlmesh_trio.testing import HookFailure, RecordingHooks, ScriptedEnv, ScriptedModel

CTX = RouteContext("sess", "r0", "env-1", "env", "model")


def spec(**kwargs: Any) -> RouteSpec:
    return RouteSpec(route_id="r0", session_id="sess", env_id="env-1", **kwargs)


async def test_event_order_for_one_episode() -> None:
    hooks = RecordingHooks()
    await RouteDriver(
        spec(max_episodes=1), ScriptedEnv(episode_lengths=2), ScriptedModel(), hooks
    ).run()
    assert hooks.names() == [
        "session_started",
        "log",  # env reset complete
        "episode_started",
        "transform_observation",
        "observation_emitted",  # the reset observation
        "transform_action",
        "action_received",
        "step_completed",
        "observation_emitted",
        "transform_observation",
        "transform_action",
        "action_received",
        "step_completed",
        "observation_emitted",
        "episode_completed",
        "telemetry_window",
        "telemetry_summary",
        "session_ended",
    ]


async def test_events_carry_route_context_and_episode_identity() -> None:
    hooks = RecordingHooks()
    env = ScriptedEnv(episode_lengths=2, final_info={"is_success": True})
    report = await RouteDriver(spec(seeds=(4, 5)), env, ScriptedModel(), hooks).run()
    for _, event in hooks.events:
        assert event.route == CTX and event.session_id == "sess" and event.route_id == "r0"
        assert event.env_id == "env-1"
    started = hooks.of("episode_started")
    assert [(e.episode_record_id, e.episode_index, e.seed) for e in started] == [
        ("ep-000001", 0, 4),
        ("ep-000002", 1, 5),
    ]
    assert [e.started_from_auto_reset for e in started] == [False, True]
    completed = hooks.of("episode_completed")
    assert [c.result for c in completed] == list(report.episodes)
    first = completed[0]
    assert (first.step_count, first.cumulative_reward, first.terminated) == (2, 2.0, True)
    assert first.final_info is not None and first.final_info.entries["is_success"].bool is True
    action = hooks.of("action_received")[0]
    assert (action.step, action.env_indices, action.episode_record_ids) == (1, (0,), ("ep-000001",))
    assert action.action_space == env.contract.spec.action_space
    steps = hooks.of("step_completed")
    assert [(s.step, s.rewards) for s in steps] == [
        (1, (1.0,)),
        (2, (1.0,)),
        (3, (1.0,)),
        (4, (1.0,)),
    ]
    obs = hooks.of("observation_emitted")
    assert [o.is_reset for o in obs] == [True, False, False, True, False, False]
    assert obs[0].num_envs == 1 and obs[0].observation_space == env.contract.spec.observation_space
    ended = hooks.of("session_ended")[0]
    assert (ended.reason, ended.total_steps, ended.total_episodes) == (
        "completed requested episodes",
        4,
        2,
    )


async def test_failing_event_hooks_are_logged_and_the_route_goes_on() -> None:
    hooks = RecordingHooks(fail_events={"step_completed", "episode_started", "session_ended"})
    report = await RouteDriver(
        spec(max_episodes=2), ScriptedEnv(episode_lengths=3), ScriptedModel(), hooks
    ).run()
    assert report.total_episodes == 2
    messages = [e.message for e in hooks.of("log")]
    assert "runtime hook step_completed failed: injected step_completed failure" in messages
    assert "runtime hook episode_started failed: injected episode_started failure" in messages
    assert hooks.of("session_failed") == []


async def test_transforms_replace_the_values_sent_on() -> None:
    new_obs = spaces_pb.SpaceValue(leaves=[struct.pack("<2f", 9.0, 9.0)])
    new_action = spaces_pb.SpaceValue(leaves=[struct.pack("<q", 1)])

    async def obs_fn(event: ObservationEmittedEvent) -> spaces_pb.SpaceValue | None:
        return new_obs if event.is_reset else None  # None keeps the value unchanged

    async def action_fn(event: Any) -> spaces_pb.SpaceValue:
        return new_action

    hooks = RecordingHooks(transform_observation_fn=obs_fn, transform_action_fn=action_fn)
    env, model = ScriptedEnv(episode_lengths=2), ScriptedModel(action=0)
    await RouteDriver(spec(max_episodes=1), env, model, hooks).run()
    assert model.predicts[0].observation == new_obs
    assert model.predicts[1].observation.leaves == [struct.pack("<2f", 0.0, 1.0)]
    assert all(s.action == new_action for s in env.steps)
    # The emitted reset observation is the transformed one; action events see the new action.
    assert hooks.of("observation_emitted")[0].observation == new_obs
    assert hooks.of("action_received")[0].action == new_action


async def test_hook_chain_sends_events_to_every_hook_and_reports_the_first_error() -> None:
    a = RecordingHooks(fail_events={"log"})
    b = RecordingHooks(fail_events={"log"})
    c = RecordingHooks()
    chain = HookChain([a, b, c])
    from rlmesh_trio.hooks.events import LogEvent

    with pytest.raises(HookFailure):
        await chain.log(LogEvent(CTX, "info", "hello"))
    assert len(a.of("log")) == len(b.of("log")) == len(c.of("log")) == 1


async def test_hook_chain_transforms_run_in_order_and_stop_at_the_first_error() -> None:
    seen: list[str] = []

    class Append(RuntimeHooks):
        def __init__(self, tag: bytes) -> None:
            self.tag = tag

        async def transform_observation(self, event: Any) -> spaces_pb.SpaceValue | None:
            seen.append(self.tag.decode())
            return spaces_pb.SpaceValue(leaves=[event.observation.leaves[0] + self.tag])

    class Keep(RuntimeHooks):
        async def transform_observation(self, event: Any) -> None:
            seen.append("keep")
            return None

    class Boom(RuntimeHooks):
        async def transform_observation(self, event: Any) -> None:
            raise ValueError("boom")

    event = ObservationEmittedEvent(
        CTX,
        "e",
        "ep-000001",
        ("e",),
        ("ep-000001",),
        (0,),
        0,
        0,
        True,
        1,
        None,
        spaces_pb.SpaceValue(leaves=[b"x"]),
    )
    out = await HookChain([Append(b"1"), Keep(), Append(b"2")]).transform_observation(event)
    assert out == spaces_pb.SpaceValue(leaves=[b"x12"]) and seen == ["1", "keep", "2"]
    assert await HookChain([Keep()]).transform_observation(event) is None
    seen.clear()
    with pytest.raises(ValueError, match="boom"):
        await HookChain([Append(b"1"), Boom(), Append(b"2")]).transform_observation(event)
    assert seen == ["1"]
    assert attrs.evolve(event, observation=None).observation is None


async def test_a_failing_chain_transform_is_fatal_to_the_route() -> None:
    from rlmesh_trio import HookError

    chain = HookChain([RecordingHooks(), RecordingHooks(fail_transform="transform_action")])
    driver = RouteDriver(spec(max_episodes=1), ScriptedEnv(), ScriptedModel(), chain)
    with pytest.raises(HookError, match="transform_action failed"):
        await driver.run()


def test_overrides_lets_the_driver_skip_unused_events() -> None:
    class OnlySteps(RuntimeHooks):
        async def step_completed(self, event: Any) -> None:
            return None

    assert overrides(OnlySteps(), "step_completed")
    assert not overrides(OnlySteps(), "episode_started")
    assert not overrides(None, "step_completed")
    assert overrides(HookChain([RuntimeHooks(), OnlySteps()]), "step_completed")
    assert not overrides(HookChain([RuntimeHooks()]), "log")
