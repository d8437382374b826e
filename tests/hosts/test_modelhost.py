"""The model host: 0.1.0's model-server semantics, every message, without a transport."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trio

from rlmesh_trio import spaces
from rlmesh_trio._modelhost import (
    ModelHost,
    Policy,
    ThreadedInvoker,
    as_policy,
    inline_invoke,
    policy,
)
from rlmesh_trio._protocol import core_pb, model_pb, spaces_pb

Code = model_pb.ModelErrorCode

CARTPOLE = gym.make("CartPole-v1")


def env_spec(obs_space: gym.Space[Any], act_space: gym.Space[Any], env_id: str = "X") -> Any:
    return core_pb.EnvSpec(
        id=env_id,
        observation_space=spaces.from_gymnasium(obs_space),
        action_space=spaces.from_gymnasium(act_space),
    )


CARTPOLE_SPEC = env_spec(CARTPOLE.observation_space, CARTPOLE.action_space, "CartPole-v1")


def ctx(env_id: str = "e1", request_id: str = "r1", session_id: str = "s") -> Any:
    return model_pb.AdapterContext(session_id=session_id, env_id=env_id, request_id=request_id)


def resolve_req(env_id: str = "e1", spec: Any = CARTPOLE_SPEC, edition: str = "2026.06") -> Any:
    return model_pb.JoinRequest(
        request_id=f"{env_id}:resolve",
        resolve_adapter=model_pb.ResolveAdapterRequest(
            context=ctx(env_id, f"{env_id}:resolve"),
            env_spec=spec,
            selected_workflow_edition=edition,
            execution_horizon=1,
        ),
    )


def predict_body(
    obs: Any, env_id: str = "e1", request_id: str = "p1", ids: tuple[str, ...] = ("a",)
) -> Any:
    return model_pb.PredictRequest(
        context=ctx(env_id, request_id),
        observation=obs,
        episode_info=[model_pb.EpisodeInfo(episode_id=i) for i in ids],
    )


def cartpole_obs(rows: int, theta: float = 0.1) -> Any:
    obs = np.zeros((rows, 4), np.float32)
    obs[:, 2] = [theta if i % 2 == 0 else -theta for i in range(rows)]
    return spaces.encode_stacked(CARTPOLE_SPEC.observation_space, obs, rows)


def sign_policy(obs: Any) -> int:
    return 1 if obs[2] > 0 else 0


class Counting:
    """A batched policy that records how it was called."""

    def __init__(self) -> None:
        self.single: list[Any] = []
        self.batches: list[Any] = []

    def predict(self, obs: Any) -> int:
        self.single.append(obs)
        return 1 if obs[2] > 0 else 0

    def predict_batch(self, obs: Any) -> Any:
        self.batches.append(obs)
        return (np.asarray(obs)[:, 2] > 0).astype(np.int64)


async def handle(host: ModelHost, request: Any) -> Any:
    return await host.handle(request, inline_invoke)


async def resolved(policy_obj: Any, *env_ids: str, spec: Any = CARTPOLE_SPEC) -> ModelHost:
    host = ModelHost(policy_obj)
    for env_id in env_ids or ("e1",):
        response = await handle(host, resolve_req(env_id, spec))
        assert response.resolve_adapter is not None, response
    return host


def error_of(response: Any) -> tuple[int, str, bool]:
    assert response.error is not None, response
    return response.error.code, response.error.message, response.error.is_recoverable


# ---------------------------------------------------------------------- resolve


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            model_pb.ResolveAdapterRequest(env_spec=CARTPOLE_SPEC),
            "resolve_adapter missing adapter context",
        ),
        (
            model_pb.ResolveAdapterRequest(context=ctx(env_id=""), env_spec=CARTPOLE_SPEC),
            "resolve_adapter env_id is empty",
        ),
        (model_pb.ResolveAdapterRequest(context=ctx()), "resolve_adapter missing env_spec"),
        (
            model_pb.ResolveAdapterRequest(context=ctx(), env_spec=core_pb.EnvSpec(id="x")),
            "env EnvSpec has no action_space; a model worker cannot encode actions without it",
        ),
        (
            model_pb.ResolveAdapterRequest(
                context=ctx(), env_spec=CARTPOLE_SPEC, selected_workflow_edition="2099.01"
            ),
            'runtime pinned this route to workflow edition "2099.01", which this model build '
            'does not implement (implements ["2026.06"])',
        ),
        (
            model_pb.ResolveAdapterRequest(
                context=ctx(),
                env_spec=core_pb.EnvSpec(
                    id="x",
                    action_space=CARTPOLE_SPEC.action_space,
                    observation_space=spaces_pb.SpaceSpec(
                        dtype=spaces_pb.DataType.FLOAT32, box=spaces_pb.BoxSpec(unbounded=True)
                    ),
                ),
            ),
            None,  # a spec decode failure: "decode error: $: ..."
        ),
    ],
)
async def test_resolve_refusals_use_0_1_0_messages(body: Any, message: str | None) -> None:
    host = ModelHost(sign_policy)
    response = await handle(host, model_pb.JoinRequest(request_id="q", resolve_adapter=body))
    code, text, recoverable = error_of(response)
    assert response.request_id == "q"
    assert code == Code.INVALID_REQUEST
    assert not recoverable
    if message is None:
        assert text.startswith("decode error: $: "), text
    else:
        assert text == message
    assert not host.adapters


async def test_resolve_is_an_idempotent_upsert_and_accepts_an_empty_pin() -> None:
    host = ModelHost(sign_policy)
    assert (await handle(host, resolve_req("e1"))).resolve_adapter is not None
    other = env_spec(gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(3))
    again = await handle(host, resolve_req("e1", other, edition=""))
    assert again.resolve_adapter is not None
    assert list(host.adapters) == ["e1"]
    assert host.adapters["e1"].env_spec is other


async def test_routes_with_equal_specs_share_what_resolve_derives_from_them() -> None:
    # Two routes over one kind of env (specs equal by value, distinct objects): one
    # one-row plan and one policy for both; other specs get their own.
    host = ModelHost(sign_policy)
    twin = env_spec(CARTPOLE.observation_space, CARTPOLE.action_space, "CartPole-v1")
    other = env_spec(gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(3))
    for env_id, spec in (("e1", CARTPOLE_SPEC), ("e2", twin), ("e3", other)):
        assert (await handle(host, resolve_req(env_id, spec))).resolve_adapter is not None
    first, second, third = (host.adapters[e] for e in ("e1", "e2", "e3"))
    assert second.env_spec is twin
    assert second.row_plan is first.row_plan and second.policy is first.policy
    assert (second.fuse_key, second.action_key) == (first.fuse_key, first.action_key)
    assert third.row_plan is not first.row_plan
    assert third.fuse_key != first.fuse_key


async def test_a_refused_spec_is_refused_again_on_every_resolve() -> None:
    bad = core_pb.EnvSpec(
        id="X",
        action_space=spaces.from_gymnasium(gym.spaces.Discrete(2)),
        observation_space=spaces_pb.SpaceSpec(
            dtype=spaces_pb.DataType.FLOAT32, box=spaces_pb.BoxSpec(unbounded=True)
        ),
    )
    host = ModelHost(sign_policy)
    for env_id in ("e1", "e2"):
        code, text, _ = error_of(await handle(host, resolve_req(env_id, bad)))
        assert code == Code.INVALID_REQUEST and text.startswith("decode error: $: "), text
    assert not host.adapters


# ---------------------------------------------------------------------- predict validation

_GOOD_OBS = cartpole_obs(1)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            model_pb.PredictRequest(
                observation=_GOOD_OBS, episode_info=[model_pb.EpisodeInfo(episode_id="a")]
            ),
            "internal error: model request missing adapter context",
        ),
        (predict_body(_GOOD_OBS, env_id=""), "internal error: model env_id is empty"),
        (predict_body(_GOOD_OBS, request_id=""), "internal error: model request_id is empty"),
        (
            predict_body(_GOOD_OBS, ids=()),
            "internal error: model predict must include at least one episode_id",
        ),
        (
            predict_body(_GOOD_OBS, ids=("",)),
            "internal error: model predict episode_info[0].episode_id is empty",
        ),
        (
            predict_body(cartpole_obs(2), ids=("a", "")),
            "internal error: model predict episode_info[1].episode_id is empty",
        ),
        (
            predict_body(cartpole_obs(2), ids=("e1", "e1")),
            'internal error: model predict has duplicate episode_id "e1"',
        ),
        (
            predict_body(_GOOD_OBS, env_id="never-resolved"),
            "model error: model env adapter was not resolved",
        ),
    ],
)
async def test_predict_refusals_use_0_1_0_messages(body: Any, message: str) -> None:
    host = await resolved(sign_policy)
    response = await handle(host, model_pb.JoinRequest(request_id="q", predict=body))
    assert response.request_id == "q"
    assert error_of(response) == (Code.INTERNAL, message, False)


async def test_rows_that_do_not_match_the_slab_are_a_model_error() -> None:
    host = await resolved(sign_policy)
    response = await handle(
        host,
        model_pb.JoinRequest(request_id="q", predict=predict_body(_GOOD_OBS, ids=("a", "b"))),
    )
    code, text, recoverable = error_of(response)
    assert (code, recoverable) == (Code.INTERNAL, False)
    assert text.startswith("internal error: model error: ")
    assert "16" in text  # the slab's byte count is named


async def test_policy_exception_is_internal_and_names_it() -> None:
    def broken(obs: Any) -> int:
        raise ValueError("boom")

    host = await resolved(broken)
    response = await handle(
        host, model_pb.JoinRequest(request_id="q", predict=predict_body(_GOOD_OBS))
    )
    assert error_of(response) == (Code.INTERNAL, "internal error: ValueError: boom", False)


async def test_an_action_outside_the_space_is_a_model_error() -> None:
    host = await resolved(lambda obs: "left")  # a Discrete action must be an integer
    response = await handle(
        host, model_pb.JoinRequest(request_id="q", predict=predict_body(_GOOD_OBS))
    )
    code, text, _ = error_of(response)
    assert code == Code.INTERNAL
    assert text.startswith("internal error: model error: the policy returned an action")


# ---------------------------------------------------------------------- predict results


async def test_predict_echoes_context_and_returns_exactly_one_frame() -> None:
    host = await resolved(sign_policy)
    body = predict_body(cartpole_obs(1), request_id="not-the-envelope-id")
    response = await handle(host, model_pb.JoinRequest(request_id="env-rid", predict=body))
    assert response.request_id == "env-rid"
    assert response.endpoint_total_ns is not None and response.endpoint_total_ns > 0
    # The phase counters 0.1.0 servers send: set, and within the total.
    phases = response.decode_ns + response.user_ns + response.encode_ns
    assert response.user_ns > 0 and phases <= response.endpoint_total_ns
    predict = response.predict
    assert bytes(predict.context) == bytes(body.context)
    assert len(predict.actions) == 1
    assert spaces.decode_batch(CARTPOLE_SPEC.action_space, predict.actions[0], 1) == [1]


async def test_single_row_is_unbatched_and_many_rows_go_row_by_row_without_a_batch_form() -> None:
    seen: list[Any] = []

    def record(obs: Any) -> int:
        seen.append(obs)
        return sign_policy(obs)

    host = await resolved(record)
    await host.predict(predict_body(cartpole_obs(1)), inline_invoke)
    assert seen[0].shape == (4,)
    seen.clear()
    response = await host.predict(predict_body(cartpole_obs(3), ids=("a", "b", "c")), inline_invoke)
    assert [o.shape for o in seen] == [(4,)] * 3
    assert spaces.decode_batch(CARTPOLE_SPEC.action_space, response.actions[0], 3) == [1, 0, 1]


async def test_many_rows_use_predict_batch_when_present() -> None:
    counting = Counting()
    host = await resolved(counting)
    await host.predict(predict_body(cartpole_obs(1)), inline_invoke)
    assert len(counting.single) == 1 and not counting.batches
    response = await host.predict(predict_body(cartpole_obs(4), ids=tuple("abcd")), inline_invoke)
    assert len(counting.batches) == 1 and counting.batches[0].shape == (4, 4)
    assert len(counting.single) == 1
    assert spaces.decode_batch(CARTPOLE_SPEC.action_space, response.actions[0], 4) == [1, 0, 1, 0]


async def test_batched_only_policy_serves_a_single_row_as_a_batch_of_one() -> None:
    host = await resolved(policy(batched=lambda b: (np.asarray(b)[:, 2] > 0).astype(np.int64)))
    response = await host.predict(predict_body(cartpole_obs(1)), inline_invoke)
    assert spaces.decode_batch(CARTPOLE_SPEC.action_space, response.actions[0], 1) == [1]


TEXT_SPEC = env_spec(gym.spaces.Text(8), gym.spaces.Discrete(10))


async def test_text_observation_single_row_is_a_plain_str() -> None:
    seen: list[Any] = []

    def length(text: Any) -> int:
        seen.append(text)
        return len(text)

    host = await resolved(length, spec=TEXT_SPEC)
    obs = spaces.encode_batch(TEXT_SPEC.observation_space, ["héllo"])
    response = await host.predict(predict_body(obs), inline_invoke)
    assert seen == ["héllo"]
    assert spaces.decode_batch(TEXT_SPEC.action_space, response.actions[0], 1) == [5]

    batched = await resolved(
        policy(length, batched=lambda texts: np.array([len(t) for t in texts])), spec=TEXT_SPEC
    )
    obs2 = spaces.encode_batch(TEXT_SPEC.observation_space, ["héllo", "ab"])
    response = await batched.predict(predict_body(obs2, ids=("a", "b")), inline_invoke)
    assert spaces.decode_batch(TEXT_SPEC.action_space, response.actions[0], 2) == [5, 2]


DICT_SPACE = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
        "name": gym.spaces.Text(6),
    }
)
DICT_SPEC = env_spec(DICT_SPACE, gym.spaces.Discrete(3))


async def test_dict_observations_single_and_batched() -> None:
    singles: list[Any] = []
    batches: list[Any] = []

    def single(obs: Any) -> int:
        singles.append(obs)
        return int(obs["mode"])

    def batch(obs: Any) -> Any:
        batches.append(obs)
        return np.asarray(obs["mode"], dtype=np.int64)

    values = [
        {"pos": np.array([0.5, -0.5], np.float32), "mode": 2, "name": "ab"},
        {"pos": np.array([0.0, 0.25], np.float32), "mode": 1, "name": "xyz"},
    ]
    host = await resolved(policy(single, batched=batch), spec=DICT_SPEC)
    one = spaces.encode_batch(DICT_SPEC.observation_space, values[:1])
    response = await host.predict(predict_body(one), inline_invoke)
    assert set(singles[0]) == {"pos", "mode", "name"}
    assert singles[0]["name"] == "ab"
    np.testing.assert_array_equal(singles[0]["pos"], values[0]["pos"])
    assert spaces.decode_batch(DICT_SPEC.action_space, response.actions[0], 1) == [2]

    two = spaces.encode_batch(DICT_SPEC.observation_space, values)
    response = await host.predict(predict_body(two, ids=("a", "b")), inline_invoke)
    assert batches[0]["pos"].shape == (2, 2)
    assert list(batches[0]["name"]) == ["ab", "xyz"]
    assert spaces.decode_batch(DICT_SPEC.action_space, response.actions[0], 2) == [2, 1]


# ---------------------------------------------------------------------- grouped predict


def grouped(*groups: Any) -> Any:
    return model_pb.JoinRequest(
        request_id="g", grouped_predict=model_pb.GroupedPredictRequest(groups=list(groups))
    )


async def test_grouped_predict_fuses_groups_into_one_batched_call() -> None:
    counting = Counting()
    host = await resolved(counting, "e1", "e2", "e3")
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1, 0.1), "e1", "g1"),
            predict_body(cartpole_obs(2, -0.1), "e2", "g2", ids=("a", "b")),
            predict_body(cartpole_obs(1, 0.3), "e3", "g3"),
        ),
    )
    results = response.grouped_predict.results
    assert len(counting.batches) == 1 and counting.batches[0].shape == (4, 4)
    assert not counting.single
    got = [
        spaces.decode_batch(CARTPOLE_SPEC.action_space, r.response.actions[0], n)
        for r, n in zip(results, (1, 2, 1), strict=True)
    ]
    assert got == [[1], [0, 1], [1]]
    assert [r.response.context.request_id for r in results] == ["g1", "g2", "g3"]


async def test_grouped_predict_one_failing_group_does_not_fail_the_others() -> None:
    counting = Counting()
    host = await resolved(counting, "e1", "e2")
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1), "e1", "g1"),
            predict_body(cartpole_obs(1), "nope", "g2"),
            predict_body(cartpole_obs(2), "e2", "g3", ids=("a", "a")),
            predict_body(cartpole_obs(1, -0.2), "e2", "g4"),
        ),
    )
    results = response.grouped_predict.results
    assert len(results) == 4
    assert results[1].error.code == Code.INTERNAL
    assert results[1].error.message == "model error: model env adapter was not resolved"
    assert results[2].error.message == 'internal error: model predict has duplicate episode_id "a"'
    assert results[0].response is not None and results[3].response is not None
    assert len(counting.batches) == 1  # the two good groups still fused


async def test_grouped_predict_without_a_batch_form_runs_each_group_alone() -> None:
    seen: list[Any] = []

    def record(obs: Any) -> int:
        seen.append(obs)
        return sign_policy(obs)

    host = await resolved(record, "e1", "e2")
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1), "e1", "g1"),
            predict_body(cartpole_obs(2), "e2", "g2", ids=("a", "b")),
        ),
    )
    assert len(seen) == 3
    assert all(r.response is not None for r in response.grouped_predict.results)


async def test_grouped_predict_only_fuses_groups_sharing_an_observation_space() -> None:
    counting = Counting()
    other_box = gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
    other = env_spec(other_box, gym.spaces.Discrete(2))
    host = await resolved(counting, "e1", "e2")
    await handle(host, resolve_req("o1", other))
    await handle(host, resolve_req("o2", other))
    obs_other = spaces.encode_stacked(
        other.observation_space, np.array([[0, 0, 0.5, 0]], np.float32), 1
    )
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1), "e1", "g1"),
            predict_body(obs_other, "o1", "g2"),
            predict_body(cartpole_obs(1), "e2", "g3"),
            predict_body(obs_other, "o2", "g4"),
        ),
    )
    assert len(counting.batches) == 2
    assert all(r.response is not None for r in response.grouped_predict.results)


async def test_a_fused_call_that_returns_the_wrong_row_count_fails_its_groups() -> None:
    host = await resolved(policy(sign_policy, batched=lambda b: np.zeros(1, np.int64)), "e1", "e2")
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1), "e1", "g1"), predict_body(cartpole_obs(1), "e2", "g2")
        ),
    )
    for result in response.grouped_predict.results:
        assert result.error.code == Code.INTERNAL
        assert "returned 1 actions" in result.error.message


async def test_a_fused_call_that_raises_fails_every_fused_group() -> None:
    def explode(batch: Any) -> Any:
        raise RuntimeError("kaput")

    host = await resolved(policy(sign_policy, batched=explode), "e1", "e2")
    response = await handle(
        host,
        grouped(
            predict_body(cartpole_obs(1), "e1", "g1"), predict_body(cartpole_obs(1), "e2", "g2")
        ),
    )
    messages = [r.error.message for r in response.grouped_predict.results]
    assert messages == ["internal error: RuntimeError: kaput"] * 2


# ---------------------------------------------------------------------- lifecycle


async def test_reset_release_close_and_unknown_kinds() -> None:
    host = await resolved(sign_policy, "e1", "e2")
    reset = await handle(
        host,
        model_pb.JoinRequest(
            request_id="r",
            reset_adapter=model_pb.ResetAdapterRequest(context=ctx("unknown"), episode_ids=["x"]),
        ),
    )
    assert reset.reset_adapter is not None and reset.request_id == "r"
    for kind, field in (("reset_adapter", "ResetAdapterRequest"), ("release_adapter", "")):
        cls = getattr(model_pb, field or "ReleaseAdapterRequest")
        bad = await handle(
            host, model_pb.JoinRequest(request_id="b", **{kind: cls(context=ctx(env_id=""))})
        )
        assert error_of(bad) == (Code.INVALID_REQUEST, f"{kind} missing env_id", False)
    unknown_release = await handle(
        host,
        model_pb.JoinRequest(
            request_id="u", release_adapter=model_pb.ReleaseAdapterRequest(context=ctx("zzz"))
        ),
    )
    assert unknown_release.release_adapter is not None
    released = await handle(
        host,
        model_pb.JoinRequest(
            request_id="x", release_adapter=model_pb.ReleaseAdapterRequest(context=ctx("e1"))
        ),
    )
    assert released.release_adapter is not None
    after = await handle(
        host, model_pb.JoinRequest(request_id="p", predict=predict_body(_GOOD_OBS, "e1"))
    )
    assert error_of(after)[1] == "model error: model env adapter was not resolved"
    assert list(host.adapters) == ["e2"]
    closed = await handle(
        host, model_pb.JoinRequest(request_id="c", close=model_pb.CloseParticipantRequest())
    )
    assert closed.close is not None and not host.adapters
    empty = await handle(host, model_pb.JoinRequest(request_id="k"))
    code, text, recoverable = error_of(empty)
    assert (code, recoverable, empty.request_id) == (Code.UNSUPPORTED, True, "k")
    assert text.startswith("empty or unrecognized Join request")


def test_empty_response_arms_are_present_on_the_wire() -> None:
    # Pitfall 6: an empty response must still carry its oneof arm.
    response = model_pb.JoinResponse(request_id="r1", reset_adapter=model_pb.ResetAdapterResponse())
    assert model_pb.JoinResponse.parse(bytes(response)).reset_adapter is not None


# ---------------------------------------------------------------------- policies and invokers


async def test_async_policies_and_the_threaded_invoker() -> None:
    async def slow(obs: Any) -> int:
        await trio.sleep(0)
        return sign_policy(obs)

    host = await resolved(slow)
    response = await host.predict(predict_body(cartpole_obs(1)), inline_invoke)
    assert spaces.decode_batch(CARTPOLE_SPEC.action_space, response.actions[0], 1) == [1]

    import threading

    threads: list[str] = []

    def in_thread(obs: Any) -> int:
        threads.append(threading.current_thread().name)
        return sign_policy(obs)

    host = await resolved(in_thread)
    await host.predict(predict_body(cartpole_obs(1)), ThreadedInvoker())
    assert threads and threads[0] != threading.current_thread().name


def test_as_policy_normalises_what_users_pass() -> None:
    plain = as_policy(sign_policy)
    assert plain.predict is not None and plain.predict.fn is sign_policy and not plain.batched
    counting = as_policy(Counting())
    assert counting.batched and counting.predict is not None

    async def coro(obs: Any) -> int:
        return 0

    assert as_policy(coro).is_async
    built = policy(sign_policy)
    assert as_policy(built) is built and isinstance(built, Policy)
    with pytest.raises(TypeError, match="cannot serve"):
        as_policy(42)
    with pytest.raises(TypeError, match="needs predict"):
        Policy()
