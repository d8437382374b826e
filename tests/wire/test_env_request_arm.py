"""The env server's request parts (``decode_join_arm``): what the hand decoder would put
in the ``JoinRequest``, and ``None`` wherever it falls back to betterproto2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio._wire import env_pb
from rlmesh_trio.wire._env_codec import decode_join_arm, decode_join_request
from rlmesh_trio.wire._pb import server_counts

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
