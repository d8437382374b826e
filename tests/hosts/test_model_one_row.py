"""One-row predicts (the planned path) answer exactly as the general codec calls would.

The oracle is the public ``spaces`` codec: a one-row predict must hand the
policy ``spaces.decode_batch(obs_spec, observation, 1)[0]`` and answer
``spaces.encode_batch(action_spec, [action])``, and a refused observation or
action must carry the message built from the codec's own ``ProtocolError``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trio

from rlmesh_trio import ProtocolError, spaces
from rlmesh_trio._modelhost import ModelHost, inline_invoke, policy
from rlmesh_trio._protocol import core_pb, model_pb, spaces_pb

Code = model_pb.ModelErrorCode
Box = gym.spaces.Box

#: Observation spaces with a sample row each: the planned Box decode and every other kind.
OBSERVATIONS: list[tuple[str, gym.Space[Any]]] = [
    ("box-flat-f32", Box(-1.0, 1.0, (4,), np.float32)),
    ("box-2d-f64", Box(-np.inf, np.inf, (2, 3), np.float64)),
    ("box-int16", Box(-5, 5, (3,), np.int16)),
    ("box-bool", Box(0, 1, (3,), np.bool_)),
    ("box-empty", Box(-1.0, 1.0, (0,), np.float32)),
    ("discrete", gym.spaces.Discrete(5, start=2)),
    ("multi-binary", gym.spaces.MultiBinary(3)),
    ("multi-discrete", gym.spaces.MultiDiscrete([3, 4])),
    ("text", gym.spaces.Text(8)),
    ("dict", gym.spaces.Dict({"a": Box(-1.0, 1.0, (2,)), "b": gym.spaces.Discrete(3)})),
    ("tuple", gym.spaces.Tuple((gym.spaces.Discrete(2), Box(0.0, 1.0, (1,))))),
]

#: Action spaces with actions a policy may return (fitting or not).
ACTIONS: list[tuple[str, gym.Space[Any], list[Any]]] = [
    ("discrete", gym.spaces.Discrete(3), [1, np.int64(2), True, 1.0, 2.5, 2**70, "x", None, [1]]),
    ("box", Box(-1.0, 1.0, (2,), np.float32), [
        np.zeros(2, np.float32), np.ones(2), [0.5, 0.25], [1.0], "ab", np.zeros((2, 2)), 1e300,
    ]),
    ("box-2d", Box(-1.0, 1.0, (2, 3), np.float32), [
        np.zeros((3, 2), np.float32).T,  # not C-contiguous: bytes in C order all the same
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.full((2, 3), np.nan, np.float32),
        np.zeros((2, 3)),
        np.zeros((3, 2), np.float32),
        np.zeros(6, np.float32),
    ]),
    ("box-bool", Box(0, 1, (2,), np.bool_), [
        np.array([True, False]), np.array([1, 0]), np.array([2, 0]), [True, True],
    ]),
    ("box-int8", Box(-3, 3, (2,), np.int8), [
        np.array([1, -1], np.int8), np.array([1, 300]), np.array([0.5, 1.0]),
    ]),
    ("multi-discrete", gym.spaces.MultiDiscrete([3, 4]), [np.array([1, 2]), [0, 3], [1.5, 2]]),
    ("text", gym.spaces.Text(4), ["ab", 3, "toolong"]),
]  # fmt: skip


def spec_of(obs: gym.Space[Any], act: gym.Space[Any]) -> core_pb.EnvSpec:
    return core_pb.EnvSpec(
        id="X",
        observation_space=spaces.from_gymnasium(obs),
        action_space=spaces.from_gymnasium(act),
    )


def host_for(spec: core_pb.EnvSpec, fn: Any, *, horizon: int = 1) -> ModelHost:
    host = ModelHost(fn)
    host.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=model_pb.AdapterContext(session_id="s", env_id="e1", request_id="r0"),
            env_spec=spec,
            execution_horizon=horizon,
        )
    )
    return host


def request(observation: spaces_pb.SpaceValue | None) -> model_pb.PredictRequest:
    return model_pb.PredictRequest(
        context=model_pb.AdapterContext(session_id="s", env_id="e1", request_id="r1"),
        observation=observation,
        episode_info=[model_pb.EpisodeInfo(episode_id="ep", seed=3)],
    )


def handle(host: ModelHost, body: model_pb.PredictRequest) -> model_pb.JoinResponse:
    async def main() -> model_pb.JoinResponse:
        return await host.handle(model_pb.JoinRequest(request_id="j", predict=body), inline_invoke)

    return trio.run(main)


def predict(host: ModelHost, body: model_pb.PredictRequest) -> model_pb.PredictResponse:
    return trio.run(host.predict, body, inline_invoke)


def same_value(got: Any, want: Any) -> None:
    """Equal values of the same Python and numpy types, all the way down."""
    assert type(got) is type(want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.flags.writeable == want.flags.writeable
        np.testing.assert_array_equal(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            same_value(got[key], want[key])
    elif isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same_value(g, w)
    else:
        assert got == want


@pytest.mark.parametrize(("name", "space"), OBSERVATIONS, ids=[n for n, _ in OBSERVATIONS])
def test_policy_sees_what_the_general_decoder_gives(name: str, space: gym.Space[Any]) -> None:
    space.seed(7)
    spec = spec_of(space, gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    for _ in range(3):
        observation = spaces.encode_batch(spec.observation_space, [space.sample()])
        seen: list[Any] = []

        def record(obs: Any, seen: list[Any] = seen) -> int:
            seen.append(obs)
            return 0

        host = host_for(spec, record)
        for reply in (predict(host, request(observation)), handle(host, request(observation))):
            assert isinstance(reply, model_pb.PredictResponse | model_pb.JoinResponse)
        want = spaces.decode_batch(spec.observation_space, observation, 1)[0]
        assert len(seen) == 2
        for got in seen:
            same_value(got, want)


def test_the_decoded_box_row_is_a_private_writable_copy() -> None:
    spec = spec_of(Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    observation = spaces.encode_batch(spec.observation_space, [np.full(4, 0.5, np.float32)])

    def scribble(obs: np.ndarray) -> int:
        obs[:] = -1.0  # a policy may write into what it receives
        return 0

    host = host_for(spec, scribble)
    predict(host, request(observation))
    after = spaces.decode_batch(spec.observation_space, observation, 1)[0]
    np.testing.assert_array_equal(after, np.full(4, 0.5, np.float32))


def general_decode_message(spec: spaces_pb.SpaceSpec, observation: Any) -> str:
    with pytest.raises(ProtocolError) as caught:
        spaces.decode_batch(spec, observation or spaces_pb.SpaceValue(), 1)
    exc = caught.value
    detail = f"{exc.path}: {exc.detail}" if exc.path else exc.detail
    return f"internal error: model error: {detail}"


@pytest.mark.parametrize(("name", "space"), OBSERVATIONS, ids=[n for n, _ in OBSERVATIONS])
def test_a_bad_observation_is_refused_with_the_general_message(
    name: str, space: gym.Space[Any]
) -> None:
    spec = spec_of(space, gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    good = spaces.encode_batch(spec.observation_space, [space.sample()])
    bad_values: list[spaces_pb.SpaceValue | None] = [
        None,
        spaces_pb.SpaceValue(),
        spaces_pb.SpaceValue(leaves=[*good.leaves, b"\x00"]),
        spaces_pb.SpaceValue(leaves=[leaf + b"\x00" for leaf in good.leaves]),
        spaces_pb.SpaceValue(leaves=[leaf[:-1] for leaf in good.leaves]),
    ]
    host = host_for(spec, lambda obs: 0)
    for bad in bad_values:
        try:
            spaces.decode_batch(spec.observation_space, bad or spaces_pb.SpaceValue(), 1)
        except ProtocolError:
            pass
        else:
            continue  # e.g. an empty Box row still decodes: nothing to refuse
        error = handle(host, request(bad)).error
        assert error is not None
        assert error.code == Code.INTERNAL
        assert error.message == general_decode_message(spec.observation_space, bad)


def general_encode(spec: spaces_pb.SpaceSpec, action: Any) -> spaces_pb.SpaceValue | str:
    """The frame, or the refusal message, that the general encoder produces."""
    try:
        return spaces.encode_batch(spec, [action])
    except ProtocolError as exc:
        detail = f"{exc.path}: {exc.detail}" if exc.path else exc.detail
    except (TypeError, ValueError, OverflowError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
    return (
        "internal error: model error: the policy returned an action that does not fit "
        f"the action space: {detail}"
    )


@pytest.mark.parametrize(("name", "space", "actions"), ACTIONS, ids=[name for name, *_ in ACTIONS])
def test_actions_encode_or_fail_as_the_general_encoder(
    name: str, space: gym.Space[Any], actions: list[Any]
) -> None:
    obs_space = Box(-1.0, 1.0, (4,), np.float32)
    spec = spec_of(obs_space, space)
    assert spec.observation_space is not None and spec.action_space is not None
    observation = spaces.encode_batch(spec.observation_space, [np.zeros(4, np.float32)])
    for action in actions:
        host = host_for(spec, lambda obs, action=action: action)
        want = general_encode(spec.action_space, action)
        for response in (handle(host, request(observation)), None):
            if response is None:
                try:
                    got: Any = predict(host, request(observation)).actions[0]
                except Exception as exc:  # ModelFault: compare its message
                    got = str(exc)
            elif response.error is not None:
                assert response.error.code == Code.INTERNAL
                got = response.error.message
            else:
                assert response.predict is not None
                got = response.predict.actions[0]
            if isinstance(want, str):
                assert got == want, action
            else:
                assert isinstance(got, spaces_pb.SpaceValue)
                assert list(got.leaves) == list(want.leaves), action


def test_the_timed_path_fills_the_counters_and_answers_alike() -> None:
    spec = spec_of(Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    observation = spaces.encode_batch(spec.observation_space, [np.full(4, 0.5, np.float32)])
    host = host_for(spec, lambda obs: 1)
    served = handle(host, request(observation))
    assert served.predict is not None
    assert served.user_ns > 0 and served.decode_ns > 0 and served.encode_ns > 0
    assert served.endpoint_total_ns >= served.user_ns
    local = predict(host, request(observation))
    assert served.predict == local
    assert local.context == request(observation).context


def test_a_policy_error_names_its_exception_on_both_paths() -> None:
    spec = spec_of(Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    observation = spaces.encode_batch(spec.observation_space, [np.zeros(4, np.float32)])

    def broken(obs: Any) -> int:
        raise KeyError("weights")

    error = handle(host_for(spec, broken), request(observation)).error
    assert error is not None
    assert error.code == Code.INTERNAL
    assert error.message == "internal error: KeyError: 'weights'"


def test_chunks_and_batch_only_policies_still_take_their_own_paths() -> None:
    spec = spec_of(Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert spec.observation_space is not None
    observation = spaces.encode_batch(spec.observation_space, [np.zeros(4, np.float32)])
    batches: list[Any] = []

    def batch_only(obs: np.ndarray) -> np.ndarray:
        batches.append(obs)
        return np.ones(len(obs), np.int64)

    response = predict(host_for(spec, policy(batched=batch_only)), request(observation))
    assert [b.shape for b in batches] == [(1, 4)]
    assert response.actions[0] == spaces.encode_batch(spec.action_space, [1])
    chunked = policy(lambda obs: 0, chunk=lambda obs: np.array([1, 0, 1]))
    frames = predict(host_for(spec, chunked, horizon=2), request(observation)).actions
    assert frames == [spaces.encode_batch(spec.action_space, [a]) for a in (1, 0)]


def test_the_plan_is_made_at_resolve_and_absent_without_an_observation_space() -> None:
    spec = spec_of(Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    host = host_for(spec, lambda obs: 0)
    assert host.adapters["e1"].row_plan is not None
    blind = core_pb.EnvSpec(id="X", action_space=spec.action_space)
    host = host_for(blind, lambda obs: 0)
    assert host.adapters["e1"].row_plan is None
    observation = spaces_pb.SpaceValue(leaves=[b"\x00" * 16])
    error = handle(host, request(observation)).error
    assert error is not None
    assert error.code == Code.INTERNAL
    assert error.message == "internal error: model error: env EnvSpec has no observation_space"
