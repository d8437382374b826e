"""The env server's request parts (``decode_join_arm``): what the hand decoder would put
in the ``JoinRequest``, and ``None`` wherever it falls back to betterproto2."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio._protocol import env_pb
from rlmesh_trio._wire._env_codec import decode_join_arm, decode_join_request
from rlmesh_trio._wire._pb import server_counts

from .test_env_server_fastwire import reset_requests, step_requests, texts


@settings(max_examples=300, deadline=None)
@given(request_id=texts, arm=st.sampled_from(["step", "reset"]), data=st.data())
def test_the_parts_are_the_decoded_request(request_id: str, arm: str, data: st.DataObject) -> None:
    body = data.draw(step_requests if arm == "step" else reset_requests)
    encoded = bytes(env_pb.JoinRequest(request_id=request_id, **{arm: body}))
    parts = decode_join_arm(encoded)
    assert parts is not None
    assert env_pb.JoinRequest(request_id=parts[0], **{parts[1]: parts[2]}) == (
        decode_join_request(encoded)
    )


@pytest.mark.parametrize(
    "data",
    [
        bytes(env_pb.JoinRequest(request_id="c", configure=env_pb.ConfigureEnvRequest("x"))),
        bytes(env_pb.JoinRequest(request_id="empty")),
        bytes(env_pb.JoinRequest(step=env_pb.StepRequest(timeout_ms=5))) * 2,
        bytes(env_pb.JoinRequest(request_id="a")) * 2
        + bytes(env_pb.JoinRequest(step=env_pb.StepRequest())),
        b"\x12\x04\x10\x01\x48\x07",  # an unknown field inside the step
        b"\x12\x05\x0a\x09",  # a LEN field longer than its message
    ],
)
def test_what_falls_back_has_no_parts(data: bytes) -> None:
    before = dict(server_counts)
    assert decode_join_arm(data) is None
    assert server_counts == before


@settings(max_examples=300, deadline=None)
@given(request_id=texts, body=step_requests)
def test_a_step_read_in_one_pass_is_the_decoded_step(request_id: str, body: Any) -> None:
    from rlmesh_trio._wire._env_codec import decode_step_arm

    encoded = bytes(env_pb.JoinRequest(request_id=request_id, step=body))
    parts = decode_step_arm(encoded)
    if parts is None:  # an unusual step (an index beyond uint32): the general reader's
        assert decode_join_arm(encoded) is None or max(body.env_indices, default=0) >= 2**32
        return
    assert parts[0] == request_id
    assert env_pb.JoinRequest(request_id=parts[0], step=parts[1]) == decode_join_request(encoded)
    assert parts[1] == decode_join_arm(encoded)[2]  # type: ignore[index]


@pytest.mark.parametrize(
    "data",
    [
        bytes(env_pb.JoinRequest(reset=env_pb.ResetRequest(seeds=[1]))),
        bytes(env_pb.JoinRequest(step=env_pb.StepRequest(timeout_ms=5))) * 2,
        b"\x12\x04\x10\x01\x48\x07",
        b"\x12\x02\x10\x81" + b"\x2a\x01r",  # a varint running past the step's end
        b"\x12\x03\x18\x01\x00",  # an unpacked env index: the general reader takes it
    ],
)
def test_what_is_not_a_plain_step_is_left_to_the_general_reader(data: bytes) -> None:
    from rlmesh_trio._wire._env_codec import decode_step_arm

    assert decode_step_arm(data) is None
