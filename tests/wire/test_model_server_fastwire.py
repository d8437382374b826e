"""The model server's hot-path codec agrees with betterproto2: same objects in, same bytes out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio._protocol import model_pb, spaces_pb
from rlmesh_trio._wire._model_codec import decode_join_request, encode_join_response

texts = st.text(max_size=24)
i64 = st.integers(-(2**63), 2**63 - 1)
u64 = st.integers(0, 2**64 - 1)
space_values = st.builds(spaces_pb.SpaceValue, leaves=st.lists(st.binary(max_size=40), max_size=4))
contexts = st.none() | st.builds(
    model_pb.AdapterContext, session_id=texts, env_id=texts, request_id=texts
)
infos = st.lists(
    st.builds(model_pb.EpisodeInfo, episode_id=texts, seed=st.none() | i64), max_size=4
)
predict_requests = st.builds(
    model_pb.PredictRequest,
    context=contexts,
    observation=st.none() | space_values,
    episode_info=infos,
)
predict_responses = st.builds(
    model_pb.PredictResponse, context=contexts, actions=st.lists(space_values, max_size=3)
)


def same(a: Any, b: Any) -> bool:
    return bytes(a) == bytes(b) and a.to_dict() == b.to_dict()


@settings(max_examples=300, deadline=None)
@given(request_id=texts, predict=predict_requests)
def test_predict_requests_decode_like_betterproto2(request_id: str, predict: Any) -> None:
    data = bytes(model_pb.JoinRequest(request_id=request_id, predict=predict))
    fast = decode_join_request(data)
    reference = model_pb.JoinRequest.parse(data)
    assert same(fast, reference)
    assert fast.predict is not None
    for mine, theirs in zip(fast.predict.episode_info, reference.predict.episode_info, strict=True):
        assert mine.seed == theirs.seed  # explicit presence survives, zero included


COUNTERS = (
    "decode_ns",
    "user_ns",
    "encode_ns",
    "adapter_ns",
    "in_flight",
    "held_episodes",
    "held_bytes",
)


@settings(max_examples=300, deadline=None)
@given(
    request_id=texts,
    predict=predict_responses,
    total=st.none() | u64,
    counters=st.fixed_dictionaries({}, optional={name: u64 for name in COUNTERS}),
)
def test_predict_responses_encode_like_betterproto2(
    request_id: str, predict: Any, total: int | None, counters: dict[str, int]
) -> None:
    response = model_pb.JoinResponse(
        request_id=request_id, predict=predict, endpoint_total_ns=total, **counters
    )
    assert encode_join_response(response) == bytes(response)


@pytest.mark.parametrize(
    "message",
    [
        model_pb.JoinRequest(
            request_id="r",
            resolve_adapter=model_pb.ResolveAdapterRequest(
                context=model_pb.AdapterContext(env_id="e")
            ),
        ),
        model_pb.JoinRequest(request_id="c", close=model_pb.CloseParticipantRequest()),
        model_pb.JoinRequest(),
    ],
)
def test_other_requests_fall_back_to_betterproto2(message: Any) -> None:
    data = bytes(message)
    assert same(decode_join_request(data), model_pb.JoinRequest.parse(data))


def test_unknown_fields_and_merged_fields_fall_back() -> None:
    base = bytes(
        model_pb.JoinRequest(
            request_id="r",
            predict=model_pb.PredictRequest(
                context=model_pb.AdapterContext(env_id="e", request_id="r"),
                episode_info=[model_pb.EpisodeInfo(episode_id="a", seed=0)],
            ),
        )
    )
    unknown = base + bytes([0x98, 0x06, 0x01])  # field 99, varint 1
    assert same(decode_join_request(unknown), model_pb.JoinRequest.parse(unknown))
    # A second context message is merged into the first by protobuf rules.
    twice = bytes(
        model_pb.JoinRequest(
            predict=model_pb.PredictRequest(context=model_pb.AdapterContext(session_id="s"))
        )
    )
    merged = base + twice
    assert same(decode_join_request(merged), model_pb.JoinRequest.parse(merged))


def test_other_responses_fall_back_to_betterproto2() -> None:
    for response in (
        model_pb.JoinResponse(request_id="r", reset_adapter=model_pb.ResetAdapterResponse()),
        model_pb.JoinResponse(
            request_id="r",
            error=model_pb.ModelError(code=model_pb.ModelErrorCode.INTERNAL, message="x"),
        ),
        model_pb.JoinResponse(
            request_id="r", predict=model_pb.PredictResponse(), user_ns=5, endpoint_total_ns=0
        ),
    ):
        assert encode_join_response(response) == bytes(response)


def test_undecodable_bytes_raise() -> None:
    with pytest.raises(Exception):  # noqa: B017 - whatever betterproto2 raises
        decode_join_request(b"\x12\x06\x0a\x04\x0a\x02\xff\xfe")  # bad UTF-8 session_id


def test_the_server_hot_paths_take_the_hand_codecs() -> None:
    from rlmesh_trio._protocol import env_pb
    from rlmesh_trio._wire import _env_codec
    from rlmesh_trio._wire._pb import server_counts

    before = dict(server_counts)
    predict = model_pb.JoinRequest(request_id="p", predict=model_pb.PredictRequest())
    decode_join_request(bytes(predict))
    step = env_pb.JoinRequest(request_id="s", step=env_pb.StepRequest(timeout_ms=3))
    _env_codec.decode_join_request(bytes(step))
    encode_join_response(model_pb.JoinResponse(request_id="p", predict=model_pb.PredictResponse()))
    _env_codec.encode_join_response(env_pb.JoinResponse(reset=env_pb.ResetResponse()))
    assert server_counts["decode"] == before["decode"] + 2
    assert server_counts["encode"] == before["encode"] + 2
    assert server_counts["fallback"] == before["fallback"]
    decode_join_request(bytes(model_pb.JoinRequest(close=model_pb.CloseParticipantRequest())))
    assert server_counts["fallback"] == before["fallback"] + 1


model_errors = st.builds(
    model_pb.ModelError,
    code=st.sampled_from(list(model_pb.ModelErrorCode)),
    message=texts,
    is_recoverable=st.booleans(),
)
grouped_results = (
    st.builds(model_pb.GroupedPredictResult, response=predict_responses)
    | st.builds(model_pb.GroupedPredictResult, error=model_errors)
    | st.just(model_pb.GroupedPredictResult())
)


@settings(max_examples=200, deadline=None)
@given(request_id=texts, groups=st.lists(predict_requests, max_size=5))
def test_grouped_predict_requests_decode_like_betterproto2(request_id: str, groups: Any) -> None:
    grouped = model_pb.GroupedPredictRequest(groups=groups)
    data = bytes(model_pb.JoinRequest(request_id=request_id, grouped_predict=grouped))
    assert same(decode_join_request(data), model_pb.JoinRequest.parse(data))


@settings(max_examples=200, deadline=None)
@given(request_id=texts, results=st.lists(grouped_results, max_size=5), total=st.none() | u64)
def test_grouped_predict_responses_encode_like_betterproto2(
    request_id: str, results: Any, total: int | None
) -> None:
    response = model_pb.JoinResponse(
        request_id=request_id,
        grouped_predict=model_pb.GroupedPredictResponse(results=results),
        endpoint_total_ns=total,
        user_ns=3,
    )
    assert encode_join_response(response) == bytes(response)


def test_grouped_predicts_take_the_hand_codecs() -> None:
    from rlmesh_trio._wire._pb import server_counts

    before = dict(server_counts)
    group = model_pb.PredictRequest(context=model_pb.AdapterContext(env_id="e", request_id="r"))
    grouped = model_pb.GroupedPredictRequest(groups=[group, group])
    decode_join_request(bytes(model_pb.JoinRequest(request_id="g", grouped_predict=grouped)))
    result = model_pb.GroupedPredictResult(response=model_pb.PredictResponse())
    answer = model_pb.GroupedPredictResponse(results=[result, result])
    encode_join_response(model_pb.JoinResponse(request_id="g", grouped_predict=answer))
    assert server_counts["decode"] == before["decode"] + 1
    assert server_counts["encode"] == before["encode"] + 1
    assert server_counts["fallback"] == before["fallback"]
