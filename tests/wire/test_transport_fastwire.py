"""The hot-path codec must agree with betterproto2 exactly: same bytes out, same objects in."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio._protocol import env_pb, model_pb, spaces_pb
from rlmesh_trio._wire._client_codec import (
    decode_env_response,
    decode_model_response,
    encode_env_step,
    encode_model_grouped_predict,
    encode_model_predict,
)

texts = st.text(max_size=40)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
leaves = st.lists(st.binary(max_size=64), max_size=4)
space_values = st.builds(spaces_pb.SpaceValue, leaves=leaves)
opt_space_values = st.none() | space_values
meta_maps = st.none() | st.builds(
    spaces_pb.MetaMap,
    entries=st.dictionaries(
        st.text(max_size=8),
        st.builds(spaces_pb.MetaValue, integer=i64) | st.builds(spaces_pb.MetaValue, text=texts),
        max_size=3,
    ),
)
episodes = st.builds(
    env_pb.EpisodeMetadata,
    episode_id=texts,
    seed=st.none() | i64,
    env_index=u32,
    step_count=i64,
    cumulative_reward=st.floats(allow_nan=False),
    terminated=st.booleans(),
    truncated=st.booleans(),
    final_info=meta_maps,
)
step_requests = st.builds(
    env_pb.StepRequest,
    action=opt_space_values,
    timeout_ms=u64,
    env_indices=st.lists(u32, max_size=4),
    episode_ids=st.lists(texts, max_size=4),
)
contexts = st.none() | st.builds(
    model_pb.AdapterContext, session_id=texts, env_id=texts, request_id=texts
)
predict_requests = st.builds(
    model_pb.PredictRequest,
    context=contexts,
    observation=opt_space_values,
    episode_info=st.lists(
        st.builds(model_pb.EpisodeInfo, episode_id=texts, seed=st.none() | i64), max_size=3
    ),
)
step_responses = st.builds(
    env_pb.StepResponse,
    observation=opt_space_values,
    rewards=st.lists(st.floats(allow_nan=False), max_size=4),
    terminated_mask=st.binary(max_size=4),
    truncated_mask=st.binary(max_size=4),
    infos=meta_maps,
    completed_episodes=st.lists(episodes, max_size=2),
    env_indices=st.lists(u32, max_size=4),
)
reset_responses = st.builds(env_pb.ResetResponse, observation=opt_space_values, infos=meta_maps)
counters = st.fixed_dictionaries(
    {
        "request_id": texts,
        "endpoint_total_ns": st.none() | u64,
        "decode_ns": u64,
        "user_ns": u64,
        "encode_ns": u64,
    }
)


@settings(max_examples=300)
@given(rid=texts, step=step_requests)
def test_step_request_bytes_match_betterproto2(rid: str, step: env_pb.StepRequest) -> None:
    expected = bytes(env_pb.JoinRequest(step=step, request_id=rid))
    assert encode_env_step(rid, step) == expected


@settings(max_examples=300)
@given(rid=texts, predict=predict_requests)
def test_predict_request_bytes_match_betterproto2(
    rid: str, predict: model_pb.PredictRequest
) -> None:
    expected = bytes(model_pb.JoinRequest(predict=predict, request_id=rid))
    assert encode_model_predict(rid, predict) == expected


def _same(fast: object, slow: object) -> None:
    assert fast == slow
    assert bytes(fast) == bytes(slow)  # type: ignore[call-overload]
    assert repr(fast) == repr(slow)


@settings(max_examples=300)
@given(
    arm=st.one_of(
        st.builds(lambda r: {"step": r}, step_responses),
        st.builds(lambda r: {"reset": r}, reset_responses),
    ),
    extra=counters,
    queue=u64,
)
def test_env_responses_decode_like_betterproto2(
    arm: dict[str, object], extra: dict[str, object], queue: int
) -> None:
    data = bytes(env_pb.JoinResponse(**arm, **extra, queue_ns=queue))
    _same(decode_env_response(data), env_pb.JoinResponse.parse(data))


@settings(max_examples=300)
@given(
    context=contexts,
    actions=st.lists(space_values, max_size=3),
    extra=counters,
    adapter=u64,
    in_flight=u64,
)
def test_predict_responses_decode_like_betterproto2(
    context: model_pb.AdapterContext | None,
    actions: list[spaces_pb.SpaceValue],
    extra: dict[str, object],
    adapter: int,
    in_flight: int,
) -> None:
    data = bytes(
        model_pb.JoinResponse(
            predict=model_pb.PredictResponse(context=context, actions=actions),
            adapter_ns=adapter,
            in_flight=in_flight,
            **extra,
        )
    )
    _same(decode_model_response(data), model_pb.JoinResponse.parse(data))


def test_other_arms_and_odd_encodings_fall_back() -> None:
    error = env_pb.JoinResponse(
        request_id="r", error=env_pb.EnvError(code=env_pb.EnvErrorCode.INTERNAL, message="x")
    )
    close = env_pb.JoinResponse(request_id="r", close=env_pb.CloseEnvsResponse())
    for message in (error, close):
        data = bytes(message)
        _same(decode_env_response(data), env_pb.JoinResponse.parse(data))
    # rewards sent unpacked (fixed64 per element) and an unknown envelope field
    unpacked = b"\x12\x12" + b"\x11" + struct.pack("<d", 1.5) + b"\x11" + struct.pack("<d", 2.0)
    with_unknown = bytes(env_pb.JoinResponse(request_id="r", step=env_pb.StepResponse())) + (
        b"\x88\x01\x07"  # field 17, varint 7: not in our schema
    )
    for data in (unpacked, with_unknown):
        _same(decode_env_response(data), env_pb.JoinResponse.parse(data))
    assert decode_env_response(unpacked).step.rewards == [1.5, 2.0]
    # unknown fields a request carried in from a peer are not forwarded (betterproto2's
    # unknown-field store is private); its known fields encode exactly
    step = env_pb.StepRequest.parse(b"\x88\x01\x07")
    assert encode_env_step("r", step) == bytes(
        env_pb.JoinRequest(step=env_pb.StepRequest(), request_id="r")
    )


@settings(max_examples=200)
@given(rid=texts, groups=st.lists(predict_requests, max_size=4))
def test_grouped_predict_request_bytes_match_betterproto2(
    rid: str, groups: list[model_pb.PredictRequest]
) -> None:
    envelope = model_pb.JoinRequest(
        grouped_predict=model_pb.GroupedPredictRequest(groups=groups), request_id=rid
    )
    assert encode_model_grouped_predict(rid, groups) == bytes(envelope)


model_errors = st.builds(
    model_pb.ModelError,
    code=st.sampled_from(list(model_pb.ModelErrorCode)),
    message=texts,
    is_recoverable=st.booleans(),
)
grouped_results = st.one_of(
    st.builds(
        lambda c, a: model_pb.GroupedPredictResult(
            response=model_pb.PredictResponse(context=c, actions=a)
        ),
        contexts,
        st.lists(space_values, max_size=2),
    ),
    st.builds(lambda e: model_pb.GroupedPredictResult(error=e), model_errors),
)


@settings(max_examples=200)
@given(results=st.lists(grouped_results, max_size=4), extra=counters)
def test_grouped_predict_responses_decode_like_betterproto2(
    results: list[model_pb.GroupedPredictResult], extra: dict[str, object]
) -> None:
    data = bytes(
        model_pb.JoinResponse(
            grouped_predict=model_pb.GroupedPredictResponse(results=results), **extra
        )
    )
    _same(decode_model_response(data), model_pb.JoinResponse.parse(data))


def test_cached_route_and_episode_encodings_stay_exact_past_the_cache_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlmesh_trio._wire import _client_codec as _fastwire

    monkeypatch.setattr(_fastwire, "_CACHE_LIMIT", 3)
    for i in range(10):
        request = model_pb.PredictRequest(
            context=model_pb.AdapterContext(
                session_id=f"s{i % 4}", env_id="" if i % 5 == 0 else f"e{i}", request_id=f"r{i}"
            ),
            episode_info=[
                model_pb.EpisodeInfo(episode_id=f"ep{i % 3}", seed=None if i % 2 else -i),
                model_pb.EpisodeInfo(episode_id="", seed=i),
            ],
        )
        assert _fastwire.encode_model_predict(f"id{i}", request) == bytes(
            model_pb.JoinRequest(predict=request, request_id=f"id{i}")
        )
    assert len(_fastwire._route_prefix) <= 3 and len(_fastwire._episode_info) <= 3


@pytest.mark.parametrize("size", [127, 128, 300, 70_000])
def test_requests_with_long_fields_match_betterproto2(size: int) -> None:
    # Sizes of 128 bytes and more need a multi-byte length (the short-size table ends at 127).
    value = spaces_pb.SpaceValue(leaves=[b"\x01" * size, b"\x02"])
    step = env_pb.StepRequest(action=value, episode_ids=["e" * size])
    assert encode_env_step("r" * size, step) == bytes(
        env_pb.JoinRequest(step=step, request_id="r" * size)
    )
    predict = model_pb.PredictRequest(observation=value)
    assert encode_model_predict("r", predict) == bytes(
        model_pb.JoinRequest(predict=predict, request_id="r")
    )
