"""The env server's hot-path codec agrees with betterproto2: same objects in, same bytes out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio import spaces
from rlmesh_trio._protocol import env_pb, spaces_pb
from rlmesh_trio._wire._env_codec import decode_join_request, encode_join_response
from rlmesh_trio._wire._pb import Fallback, fields, put_varint, read_varint

texts = st.text(max_size=24)
i64 = st.integers(-(2**63), 2**63 - 1)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
space_values = st.builds(spaces_pb.SpaceValue, leaves=st.lists(st.binary(max_size=40), max_size=4))
meta_maps = st.none() | st.builds(spaces_pb.MetaMap) | st.just(spaces.meta_from_python({"a": 1}))
step_requests = st.builds(
    env_pb.StepRequest,
    action=st.none() | space_values,
    timeout_ms=u64,
    env_indices=st.lists(u32, max_size=4),
    episode_ids=st.lists(texts, max_size=3),
)
reset_requests = st.builds(
    env_pb.ResetRequest,
    seeds=st.lists(i64, max_size=4),
    options=meta_maps,
    timeout_ms=u64,
    env_indices=st.lists(u32, max_size=4),
    episode_ids=st.lists(texts, max_size=3),
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
)
step_responses = st.builds(
    env_pb.StepResponse,
    observation=st.none() | space_values,
    rewards=st.lists(st.floats(allow_nan=False), max_size=4),
    terminated_mask=st.binary(max_size=4),
    truncated_mask=st.binary(max_size=4),
    infos=meta_maps,
    completed_episodes=st.lists(episodes, max_size=2),
    env_indices=st.lists(u32, max_size=4),
)
reset_responses = st.builds(
    env_pb.ResetResponse, observation=st.none() | space_values, infos=meta_maps
)
COUNTERS = ("decode_ns", "user_ns", "encode_ns", "lane_skew_ns", "queue_ns")


def same(a: Any, b: Any) -> bool:
    return bytes(a) == bytes(b) and a.to_dict() == b.to_dict()


@settings(max_examples=300, deadline=None)
@given(request_id=texts, arm=st.sampled_from(["step", "reset"]), data=st.data())
def test_step_and_reset_requests_decode_like_betterproto2(
    request_id: str, arm: str, data: st.DataObject
) -> None:
    body = data.draw(step_requests if arm == "step" else reset_requests)
    encoded = bytes(env_pb.JoinRequest(request_id=request_id, **{arm: body}))
    fast = decode_join_request(encoded)
    reference = env_pb.JoinRequest.parse(encoded)
    assert same(fast, reference)
    assert getattr(fast, arm) is not None  # the oneof arm is set, even when empty


@settings(max_examples=300, deadline=None)
@given(
    request_id=texts,
    arm=st.sampled_from(["step", "reset"]),
    data=st.data(),
    total=st.none() | u64,
    counters=st.fixed_dictionaries({}, optional={name: u64 for name in COUNTERS}),
)
def test_step_and_reset_responses_encode_like_betterproto2(
    request_id: str, arm: str, data: st.DataObject, total: int | None, counters: dict[str, int]
) -> None:
    body = data.draw(step_responses if arm == "step" else reset_responses)
    response = env_pb.JoinResponse(
        request_id=request_id, endpoint_total_ns=total, **{arm: body}, **counters
    )
    assert encode_join_response(response) == bytes(response)


@pytest.mark.parametrize(
    "message",
    [
        env_pb.JoinRequest(request_id="c", configure=env_pb.ConfigureEnvRequest("2026.06")),
        env_pb.JoinRequest(request_id="x", close=env_pb.CloseEnvsRequest(reason="done")),
        env_pb.JoinRequest(request_id="r", render=env_pb.RenderRequest(env_indices=[0])),
        env_pb.JoinRequest(request_id="empty"),
    ],
)
def test_other_requests_fall_back_to_betterproto2(message: env_pb.JoinRequest) -> None:
    assert same(decode_join_request(bytes(message)), message)


@pytest.mark.parametrize(
    "data",
    [
        # a step arm sent twice (proto merges singular messages): betterproto2's rules apply
        bytes(env_pb.JoinRequest(step=env_pb.StepRequest(timeout_ms=5)))
        + bytes(env_pb.JoinRequest(step=env_pb.StepRequest(episode_ids=["e"]))),
        # reset then step: the last oneof arm wins
        bytes(env_pb.JoinRequest(reset=env_pb.ResetRequest(seeds=[1])))
        + bytes(env_pb.JoinRequest(request_id="r", step=env_pb.StepRequest())),
        # an unknown field inside the step
        b"\x12\x04\x10\x01\x48\x07",
        # env index beyond uint32, unpacked
        b"\x12\x06\x18\x80\x80\x80\x80\x10",
        # an unknown fixed64 field (number 20, wire type 1) in the envelope
        b"\xa1\x01" + b"\x00" * 8 + bytes(env_pb.JoinRequest(step=env_pb.StepRequest())),
        # a LEN field longer than its message (betterproto2 reads what is there)
        b"\x12\x05\x0a\x09",
    ],
)
def test_unusual_requests_decode_exactly_as_betterproto2(data: bytes) -> None:
    assert same(decode_join_request(data), env_pb.JoinRequest.parse(data))


def test_unparseable_request_raises_like_betterproto2() -> None:
    data = b"\x2a\x02\xff\xfe" + bytes(env_pb.JoinRequest(step=env_pb.StepRequest()))
    with pytest.raises(UnicodeDecodeError):  # a request id that is not UTF-8
        env_pb.JoinRequest.parse(data)
    with pytest.raises(UnicodeDecodeError):
        decode_join_request(data)


@pytest.mark.parametrize(
    "response",
    [
        env_pb.JoinResponse(request_id="c", configure=env_pb.ConfigureEnvResponse()),
        env_pb.JoinResponse(request_id="x", close=env_pb.CloseEnvsResponse()),
        env_pb.JoinResponse(
            request_id="e",
            error=env_pb.EnvError(code=env_pb.EnvErrorCode.INVALID_ACTION, message="no"),
        ),
        env_pb.JoinResponse(request_id="r", render=env_pb.RenderResponse(frame=b"png")),
    ],
)
def test_other_responses_encode_through_betterproto2(response: env_pb.JoinResponse) -> None:
    assert encode_join_response(response) == bytes(response)


@given(u64)
def test_varints_round_trip(value: int) -> None:
    out = bytearray()
    put_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))


def test_truncated_varint_is_a_fallback() -> None:
    with pytest.raises(Fallback):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(Fallback):
        fields(b"\x0a\x05ab")  # LEN longer than the data
