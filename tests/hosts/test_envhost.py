"""The env host against real gymnasium envs: 0.1.0 env-server semantics without a transport."""

from __future__ import annotations

import struct
import threading
import zlib

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_trio import spaces
from rlmesh_trio._envhost import INTERRUPTED_BUFFER, HostReply, LaneHost, VectorHost, make_host
from rlmesh_trio._protocol import CAP_MULTI_LANE_SUBSET, core_pb, env_pb, spaces_pb

from .._envhost_envs import BoxActionEnv, CountingEnv, RichEnv, TextEnv

Code = env_pb.EnvErrorCode

#: A lane endpoint advertises 0.1.0's per-lane subsets and our multi-lane ones.
LANE_CAPS = {"subset_step": "true", CAP_MULTI_LANE_SUBSET: "true"}


def act(*values: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[b"".join(struct.pack("<q", v) for v in values)])


def reset(host, **kw) -> HostReply:
    return host.handle(env_pb.JoinRequest(reset=env_pb.ResetRequest(**kw)))


def step(host, *actions: int, **kw) -> HostReply:
    body = env_pb.StepRequest(action=act(*actions) if actions else None, **kw)
    return host.handle(env_pb.JoinRequest(step=body))


def error_of(reply: HostReply) -> env_pb.EnvError:
    assert reply.error is not None, reply
    return reply.error


# -- contract -------------------------------------------------------------------------------


def test_cartpole_contract_matches_0_1_0() -> None:
    host = make_host(gym.make("CartPole-v1"))
    contract = host.contract
    assert contract.spec.id == "CartPole-v1"
    assert contract.num_envs == 1
    assert contract.render_mode == ""
    assert contract.autoreset_mode == core_pb.AutoresetMode.DISABLED
    assert host.capabilities == LANE_CAPS
    obs = contract.spec.observation_space
    assert obs.dtype == spaces_pb.DataType.FLOAT32
    assert obs.box.elementwise.low.hex() == "9a9999c0000080ff5077d6be000080ff"
    act_spec = contract.spec.action_space
    assert act_spec.dtype == spaces_pb.DataType.INT64 and act_spec.discrete.n == 2
    meta = spaces.meta_to_python(contract.spec.metadata)
    assert meta["render_modes"] == ["human", "rgb_array"] and meta["render_fps"] == 50


def test_unknown_env_id_and_render_mode() -> None:
    host = make_host(CountingEnv(render_mode="rgb_array"))
    assert host.contract.spec.id == "UnknownEnv-v1"
    assert host.contract.render_mode == "rgb_array"


# -- one env: episodes ----------------------------------------------------------------------


def test_cartpole_episode_carries_pushed_id_and_seed() -> None:
    host = make_host(gym.make("CartPole-v1"))
    first = reset(host, seeds=[1], episode_ids=["e0"], timeout_ms=300000)
    assert first.response.reset.observation.leaves[0] == bytes.fromhex(
        "caf29a3a8b82383d92c011bd4ec4373d"
    )
    steps = 0
    while True:
        steps += 1
        reply = step(host, 1, episode_ids=["e0"])
        done = reply.response.step
        assert done.rewards == [1.0] and len(done.terminated_mask) == 1
        if done.completed_episodes:
            break
    (episode,) = done.completed_episodes
    assert episode.episode_id == "e0" and episode.seed == 1 and episode.env_index == 0
    assert episode.step_count == steps == 9 and episode.cumulative_reward == 9.0
    assert episode.terminated and not episode.truncated
    assert episode.final_info is not None and episode.final_info.entries == {}
    assert episode.start_timestamp_ns <= episode.end_timestamp_ns
    # Stepping a finished DISABLED env is allowed and reports nothing.
    after = step(host, 1).response.step
    assert after.completed_episodes == []


def test_unseeded_reset_leaves_seed_unset_and_zero_seed_is_kept() -> None:
    host = make_host(CountingEnv(done_at=1))
    reset(host, episode_ids=["a"])
    (ep,) = step(host, 0).response.step.completed_episodes
    assert ep.seed is None
    reset(host, seeds=[0], episode_ids=["b"])
    (ep,) = step(host, 0).response.step.completed_episodes
    assert ep.seed == 0 and ep.episode_id == "b"


def test_reset_infos_options_and_final_info() -> None:
    host = make_host(CountingEnv(done_at=1))
    options = spaces.meta_map_from_python({"level": 3})
    infos = reset(host, seeds=[4], options=options).response.reset.infos
    assert spaces.meta_to_python(infos) == {"seed": 4, "options": {"level": 3}}
    (ep,) = step(host, 2).response.step.completed_episodes
    assert spaces.meta_to_python(ep.final_info) == {"t": 1, "is_success": True}
    assert ep.episode_id == "" and ep.cumulative_reward == 2.5


def test_reset_while_running_interrupts_and_next_step_reports_it() -> None:
    host = make_host(CountingEnv(done_at=1))
    reset(host, seeds=[7], episode_ids=["old"])
    reset(host, episode_ids=["new"])
    first, second = step(host, 1).response.step.completed_episodes
    assert first.episode_id == "old" and first.seed == 7 and first.truncated
    assert not first.terminated and first.final_info is None and first.step_count == 0
    assert second.episode_id == "new" and second.terminated


def test_interrupted_buffer_is_bounded() -> None:
    host = make_host(CountingEnv(done_at=5))
    for i in range(INTERRUPTED_BUFFER + 20):
        reset(host, episode_ids=[f"e{i}"])
    final = host.handle(env_pb.JoinRequest(close=env_pb.CloseEnvsRequest())).response.close
    ids = [e.episode_id for e in final.final_episodes]
    assert len(ids) == INTERRUPTED_BUFFER + 1
    assert ids[0] == "e19" and ids[-1] == f"e{INTERRUPTED_BUFFER + 19}"


def test_close_finalises_running_episodes_and_ends_stream() -> None:
    host = make_host(CountingEnv(done_at=9))
    reset(host, seeds=[3], episode_ids=["a"])
    step(host, 2)
    reply = host.handle(env_pb.JoinRequest(close=env_pb.CloseEnvsRequest(reason="client close")))
    assert reply.end_stream
    (ep,) = reply.response.close.final_episodes
    assert ep.episode_id == "a" and ep.truncated and not ep.terminated and ep.final_info is None
    assert ep.step_count == 1 and ep.cumulative_reward == 2.5 and ep.seed == 3
    # An empty close still carries its oneof arm.
    empty = host.handle(env_pb.JoinRequest(close=env_pb.CloseEnvsRequest(), request_id="r1"))
    empty.response.request_id = "r1"
    assert bytes(empty.response) == bytes.fromhex("22002a027231")


def test_end_session_drops_leftovers() -> None:
    host = make_host(CountingEnv(done_at=9))
    reset(host, episode_ids=["a"])
    host.end_session()
    close = host.handle(env_pb.JoinRequest(close=env_pb.CloseEnvsRequest())).response.close
    assert close.final_episodes == []


# -- errors ---------------------------------------------------------------------------------


def test_action_checks_are_recoverable_invalid_action() -> None:
    host = make_host(CountingEnv())
    reset(host)
    cases = [
        (env_pb.StepRequest(), "expected 1 actions, got 0"),
        (
            env_pb.StepRequest(action=spaces_pb.SpaceValue(leaves=[bytes(8), bytes(8)])),
            "length mismatch: got 2 leaf slabs, spec expects 1",
        ),
        (
            env_pb.StepRequest(action=spaces_pb.SpaceValue(leaves=[bytes(4)])),
            "length mismatch: slab: got 4 bytes, expected 1 lanes * 8",
        ),
        (env_pb.StepRequest(action=act(5)), "$: value 5 not in range [0, 3)"),
    ]
    for body, message in cases:
        reply = host.handle(env_pb.JoinRequest(step=body))
        err = error_of(reply)
        assert (err.code, err.message, err.is_recoverable) == (Code.INVALID_ACTION, message, True)
        assert not reply.end_stream
    assert step(host, 1).response.step.rewards == [1.5]


def test_nan_box_action_is_invalid() -> None:
    host = make_host(BoxActionEnv())
    reset(host)
    leaf = np.array([np.nan, 0.0], np.float32).tobytes()
    reply = host.handle(
        env_pb.JoinRequest(step=env_pb.StepRequest(action=spaces_pb.SpaceValue(leaves=[leaf])))
    )
    assert error_of(reply).message == "$: Box value at element 0 is NaN"


def test_env_exception_is_internal_and_ends_the_stream() -> None:
    env = CountingEnv()
    host = make_host(env)
    reset(host, episode_ids=["a"])
    env.fail_with = ValueError("boom")
    reply = step(host, 1)
    err = error_of(reply)
    assert (err.code, err.message, err.is_recoverable) == (
        Code.INTERNAL,
        "step failed: ValueError: boom",
        False,
    )
    assert reply.end_stream


def test_edition_pin_and_unknown_kind() -> None:
    host = make_host(CountingEnv())
    ok = host.handle(
        env_pb.JoinRequest(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition="2026.06")
        )
    )
    assert ok.response.configure is not None and not ok.end_stream
    empty_pin = host.handle(env_pb.JoinRequest(configure=env_pb.ConfigureEnvRequest()))
    assert empty_pin.response.configure is not None
    bad = host.handle(
        env_pb.JoinRequest(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition="2099.01")
        )
    )
    err = error_of(bad)
    assert err.code == Code.INVALID_ACTION and not err.is_recoverable and bad.end_stream
    assert err.message == (
        'runtime pinned this env to workflow edition "2099.01", which this env build '
        'does not implement (implements ["2026.06"])'
    )
    unknown = host.handle(env_pb.JoinRequest(request_id="x"))
    err = error_of(unknown)
    assert err.code == Code.UNSUPPORTED and err.is_recoverable and not unknown.end_stream
    assert err.message.startswith("empty or unrecognized Join request")


def test_timeout_answers_after_the_call_and_discards_its_result() -> None:
    env = CountingEnv(done_at=3)
    host = make_host(env)
    reset(host, episode_ids=["a"])
    env.step_delay = 0.08
    slow = step(host, 1, timeout_ms=20)
    err = error_of(slow)
    assert (err.code, err.message, err.is_recoverable) == (
        Code.TIMEOUT,
        "env.step timed out after 20ms",
        True,
    )
    env.step_delay = 0.0
    step(host, 1)
    (ep,) = step(host, 1).response.step.completed_episodes
    # The env did take the slow step (t reached 3) but the episode never counted it.
    assert ep.step_count == 2 and ep.cumulative_reward == 3.0
    slow_reset = reset(host, timeout_ms=10, options=spaces.meta_map_from_python({"sleep": 0.05}))
    assert error_of(slow_reset).message == "env.reset timed out after 10ms"


# -- rich spaces ----------------------------------------------------------------------------


def test_dict_and_text_spaces_round_trip() -> None:
    env = RichEnv()
    host = make_host(env)
    obs_spec = host.contract.spec.observation_space
    assert list(obs_spec.dict.keys) == ["count", "text", "zpos"]
    obs = spaces.decode(obs_spec, reset(host).response.reset.observation)
    assert obs["text"] == "héllo"
    action = spaces.encode(
        host.contract.spec.action_space,
        {"move": np.array([0.1, 0.2], np.float32), "say": "hi"},
    )
    reply = host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=action)))
    obs = spaces.decode(obs_spec, reply.response.step.observation)
    assert obs["text"] == "hi" and obs["count"] == 1
    assert env.last_action["say"] == "hi"


def test_text_env() -> None:
    host = make_host(TextEnv())
    spec = host.contract.spec
    assert spaces.decode(spec.observation_space, reset(host).response.reset.observation) == "start"
    action = spaces.encode(spec.action_space, "bye")
    reply = host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=action)))
    assert spaces.decode(spec.observation_space, reply.response.step.observation) == "BYE"
    assert reply.response.step.terminated_mask == b"\x01"


# -- render ---------------------------------------------------------------------------------


def test_render_png_no_frame_and_too_many_lanes() -> None:
    host = make_host(CountingEnv(render_mode="rgb_array"))
    reset(host)
    frame = host.handle(env_pb.JoinRequest(render=env_pb.RenderRequest(env_indices=[0])))
    render = frame.response.render
    assert render.format == env_pb.RenderFormat.PNG and render.frame.startswith(b"\x89PNG")
    idat = render.frame.index(b"IDAT")
    size = struct.unpack(">I", render.frame[idat - 4 : idat])[0]
    raw = zlib.decompress(render.frame[idat + 4 : idat + 4 + size])
    assert raw == (b"\x00" + bytes([7] * 9)) * 2
    none = make_host(CountingEnv())
    empty = none.handle(env_pb.JoinRequest(render=env_pb.RenderRequest()))
    assert empty.response.render is not None and empty.response.render.frame is None
    many = host.handle(env_pb.JoinRequest(render=env_pb.RenderRequest(env_indices=[0, 1])))
    err = error_of(many)
    assert err.code == Code.UNSUPPORTED and err.is_recoverable
    assert err.message == "render requests support at most one env_index"


# -- lanes ----------------------------------------------------------------------------------


def test_lanes_subset_reset_and_step() -> None:
    host = make_host([CountingEnv(done_at=1), CountingEnv(done_at=2)])
    assert isinstance(host, LaneHost) and host.num_envs == 2
    assert host.capabilities == LANE_CAPS
    r0 = reset(host, seeds=[10], env_indices=[1], episode_ids=["b"])
    assert spaces.meta_to_python(r0.response.reset.infos) == {"seed": 10, "options": None}
    reset(host, seeds=[11], env_indices=[0], episode_ids=["a"])
    s1 = step(host, 2, env_indices=[1], episode_ids=["b"]).response.step
    assert s1.env_indices == [1] and s1.rewards == [2.5] and s1.completed_episodes == []
    s0 = step(host, 0, env_indices=[0], episode_ids=["a"]).response.step
    (ep,) = s0.completed_episodes
    assert (ep.episode_id, ep.env_index, ep.seed, ep.step_count) == ("a", 0, 11, 1)
    s1 = step(host, 2, env_indices=[1]).response.step
    (ep,) = s1.completed_episodes
    assert (ep.episode_id, ep.env_index, ep.cumulative_reward) == ("b", 1, 5.0)


def test_lanes_validation_messages() -> None:
    host = make_host([CountingEnv(), CountingEnv()])
    cases = [
        (dict(env_indices=[5]), "partial reset: env_index 5 out of range for num_envs 2"),
        (dict(env_indices=[0, 0]), "partial reset: duplicate env_index 0"),
        (
            dict(env_indices=[0], seeds=[1, 2]),
            "partial reset: seeds length 2 does not match env_indices length 1 "
            "(provide one seed per reset lane, or none)",
        ),
        (
            dict(env_indices=[0], episode_ids=["x", "y"]),
            "partial reset: episode_ids length 2 does not match env_indices length 1 "
            "(provide one episode id per reset lane, or none)",
        ),
    ]
    for kw, message in cases:
        err = error_of(reset(host, **kw))
        assert (err.code, err.message, err.is_recoverable) == (Code.INVALID_ACTION, message, True)
    err = error_of(step(host, 1, env_indices=[4]))
    assert err.message == "subset step: env_index 4 out of range for num_envs 2"


def test_lanes_whole_width_infos_layout_and_interrupts() -> None:
    host = make_host([CountingEnv(done_at=1), CountingEnv(done_at=3)])
    infos = reset(host, seeds=[5], episode_ids=["a", "b"]).response.reset.infos
    assert spaces.meta_to_python(infos) == {
        "final_info": [{"seed": 5, "options": None}, {"seed": None, "options": None}],
        "_final_info": [True, True],
    }
    reply = step(host, 1, 2).response.step
    assert reply.rewards == [1.5, 2.5] and reply.terminated_mask == b"\x01\x00"
    assert spaces.meta_to_python(reply.infos)["_final_info"] == [True, False]
    assert [e.episode_id for e in reply.completed_episodes] == ["a"]
    reset(host, env_indices=[1], episode_ids=["c"])
    later = step(host, 0, env_indices=[0]).response.step
    (interrupted,) = later.completed_episodes
    assert (interrupted.episode_id, interrupted.env_index, interrupted.truncated) == ("b", 1, True)


def test_lanes_run_concurrently_but_each_lane_in_order() -> None:
    slow, fast = CountingEnv(done_at=99), CountingEnv(done_at=99)
    host = make_host([slow, fast])
    reset(host)
    slow.gate = threading.Event()
    blocked = host.admit(
        env_pb.JoinRequest(step=env_pb.StepRequest(action=act(1), env_indices=[0]))
    )
    behind = host.admit(env_pb.JoinRequest(step=env_pb.StepRequest(action=act(1), env_indices=[0])))
    free = host.admit(env_pb.JoinRequest(step=env_pb.StepRequest(action=act(1), env_indices=[1])))
    results: dict[str, HostReply | None] = {}
    threads = [
        threading.Thread(target=lambda n=n, t=t: results.__setitem__(n, host.run(t)))
        for n, t in (("blocked", blocked), ("behind", behind), ("free", free))
    ]
    for t in threads:
        t.start()
    threads[2].join(5)
    assert "free" in results and "blocked" not in results and "behind" not in results
    slow.gate.set()
    for t in threads:
        t.join(5)
    assert results["blocked"].response.step.observation.leaves[0] == np.float32([1]).tobytes()
    assert results["behind"].response.step.observation.leaves[0] == np.float32([2]).tobytes()


def test_same_env_listed_twice_never_runs_concurrently() -> None:
    env = CountingEnv(done_at=99)
    host = make_host([env, env])
    assert host._lanes_of(env_pb.JoinRequest(step=env_pb.StepRequest(env_indices=[0]))) == {0, 1}


# -- vector envs ----------------------------------------------------------------------------


def _vector(mode: AutoresetMode) -> SyncVectorEnv:
    return SyncVectorEnv(
        [lambda: CountingEnv(done_at=1), lambda: CountingEnv(done_at=2)], autoreset_mode=mode
    )


def test_vector_next_step_roll() -> None:
    host = make_host(_vector(AutoresetMode.NEXT_STEP))
    assert isinstance(host, VectorHost)
    contract = host.contract
    assert contract.num_envs == 2 and contract.autoreset_mode == core_pb.AutoresetMode.NEXT_STEP
    assert host.capabilities == {}
    assert spaces.meta_to_python(contract.spec.metadata)["autoreset_mode"] == "NextStep"
    infos = reset(host, seeds=[5], episode_ids=["a", "b"]).response.reset.infos
    assert spaces.meta_to_python(infos)["seed"] == [5, 6]
    s1 = step(host, 1, 2, episode_ids=["a", "b"]).response.step
    (a,) = s1.completed_episodes
    assert (a.episode_id, a.seed, a.step_count, a.cumulative_reward) == ("a", 5, 1, 1.5)
    assert spaces.meta_to_python(a.final_info) == {"t": 1, "is_success": True}
    # Roll lane 0 under the new id "c"; lane 1 finishes "b" (seed unset: only lane 0 was seeded).
    s2 = step(host, 1, 2, episode_ids=["c", "b"]).response.step
    assert s2.rewards == [0.0, 2.5]
    (b,) = s2.completed_episodes
    assert (b.episode_id, b.env_index, b.seed, b.step_count) == ("b", 1, None, 2)
    s3 = step(host, 0, 0, episode_ids=["c", "d"]).response.step
    (c,) = s3.completed_episodes
    assert (c.episode_id, c.seed, c.step_count, c.cumulative_reward) == ("c", None, 1, 0.5)
    close = host.handle(env_pb.JoinRequest(close=env_pb.CloseEnvsRequest())).response.close
    assert [(e.episode_id, e.env_index) for e in close.final_episodes] == [("d", 1)]


def test_vector_refuses_subsets_and_maps_bad_seed_counts() -> None:
    host = make_host(_vector(AutoresetMode.NEXT_STEP))
    err = error_of(reset(host, env_indices=[0]))
    assert err.code == Code.UNSUPPORTED and err.message == (
        "partial reset (ResetRequest.env_indices) is not supported by this environment"
    )
    reset(host)
    err = error_of(step(host, 1, env_indices=[0]))
    assert err.message == (
        "subset stepping (StepRequest.env_indices) is not supported by this environment"
    )
    bad = reset(host, seeds=[1, 2, 3])
    err = error_of(bad)
    assert err.code == Code.INTERNAL and err.message.startswith("reset failed: ") and bad.end_stream


def test_vector_disabled_and_single_lane_and_same_step() -> None:
    host = make_host(_vector(AutoresetMode.DISABLED))
    assert host.contract.autoreset_mode == core_pb.AutoresetMode.DISABLED
    one = make_host(SyncVectorEnv([lambda: CountingEnv(done_at=1)]))
    assert isinstance(one, LaneHost) and one.capabilities == LANE_CAPS
    assert one.contract.autoreset_mode == core_pb.AutoresetMode.DISABLED
    reset(one, seeds=[2], episode_ids=["x"])
    (ep,) = step(one, 1).response.step.completed_episodes
    assert ep.episode_id == "x" and ep.seed == 2
    with pytest.raises(ValueError, match="SAME_STEP"):
        make_host(_vector(AutoresetMode.SAME_STEP))


def test_close_env_only_when_owned() -> None:
    env = CountingEnv()
    make_host(env).close()
    assert not env.closed
    make_host(env, close_env=True).close()
    assert env.closed


# -- conformance warnings -------------------------------------------------------------------


def _box(*values: float) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[np.array(values, np.float32).tobytes()])


def test_out_of_bounds_action_is_delivered_with_a_warning_once() -> None:
    host = make_host(BoxActionEnv())
    reset(host)
    first = host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=_box(2.0, 0.0))))
    assert first.response.step.rewards == [2.0]
    assert spaces.meta_to_python(first.response.step.infos) == {
        "rlmesh.conformance.warning": [
            {
                "path": "$",
                "detail": "$: Box value at element 0 out of bounds: above high bound",
                "kind": "action",
            }
        ]
    }
    again = host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=_box(0.0, -3.0))))
    assert spaces.meta_to_python(again.response.step.infos) == {}


def test_observation_and_text_warnings_and_lanes_layout() -> None:
    class Loud(CountingEnv):
        def reset(self, *, seed=None, options=None):
            return np.array([50.0], np.float32), {}

    host = make_host([Loud(), CountingEnv()])
    infos = spaces.meta_to_python(reset(host).response.reset.infos)
    warning = {
        "path": "$",
        "detail": "$: Box value at element 0 out of bounds: above high bound",
        "kind": "observation",
    }
    assert infos["rlmesh.conformance.warning"] == [warning]
    assert infos["final_info"][0]["rlmesh.conformance.warning"] == [warning]
    assert "rlmesh.conformance.warning" not in infos["final_info"][1]
    text = make_host(TextEnv())
    reset(text)
    long = spaces.encode(text.contract.spec.action_space, "x" * 40)
    reply = text.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=long)))
    entries = spaces.meta_to_python(reply.response.step.infos)["rlmesh.conformance.warning"]
    # The action is too long, and so is the observation the env echoes back.
    assert [(e["kind"], e["detail"]) for e in entries] == [
        ("action", "$: text length 40 exceeds maximum 32"),
        ("observation", "$: text length 40 exceeds maximum 32"),
    ]


def test_validation_policy_strict_and_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLMESH_VALIDATION_POLICY", "strict")
    host = make_host(BoxActionEnv())
    reset(host)
    refused = host.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=_box(0.0, -2.0))))
    err = error_of(refused)
    assert err.code == Code.INVALID_ACTION and err.is_recoverable
    assert err.message == "$: Box value at element 1 out of bounds: below low bound"
    monkeypatch.setenv("RLMESH_VALIDATION_POLICY", "off")
    quiet = make_host(BoxActionEnv())
    reset(quiet)
    reply = quiet.handle(env_pb.JoinRequest(step=env_pb.StepRequest(action=_box(9.0, 9.0))))
    assert spaces.meta_to_python(reply.response.step.infos) == {}


def test_vector_action_warning_names_the_lane_value() -> None:
    venv = SyncVectorEnv([BoxActionEnv, BoxActionEnv], autoreset_mode=AutoresetMode.NEXT_STEP)
    host = make_host(venv)
    reset(host)
    reply = host.handle(
        env_pb.JoinRequest(step=env_pb.StepRequest(action=_box(0.0, 0.0, 0.0, 7.0)))
    )
    (entry,) = spaces.meta_to_python(reply.response.step.infos)["rlmesh.conformance.warning"]
    assert entry["detail"] == "$: Box value at element 1 out of bounds: above high bound"
