"""The one codec registry: the hand codecs of the Join messages, used by both sides."""

from __future__ import annotations

from rlmesh_trio import _wire as wire
from rlmesh_trio._protocol import env_pb, model_pb, spaces_pb
from rlmesh_trio._wire._client_codec import decode_env_response, decode_model_response
from rlmesh_trio._wire._pb import server_counts
from rlmesh_trio.transport.server._net import SizeLimitedCodec


def test_the_client_reply_decoders_are_the_registered_ones() -> None:
    assert wire.HAND_DECODERS[env_pb.JoinResponse] is decode_env_response
    assert wire.HAND_DECODERS[model_pb.JoinResponse] is decode_model_response


def test_the_server_codec_takes_the_hand_path_for_join_messages() -> None:
    codec = SizeLimitedCodec()
    action = spaces_pb.SpaceValue(leaves=[b"\x01" + bytes(7)])
    request = env_pb.JoinRequest(request_id="r-1", step=env_pb.StepRequest(action=action))
    response = env_pb.JoinResponse(
        request_id="r-1", step=env_pb.StepResponse(rewards=[1.0], terminated_mask=b"\x00")
    )
    before = dict(server_counts)
    assert codec.decode(bytes(request), env_pb.JoinRequest) == request
    assert codec.encode(response, env_pb.JoinResponse) == bytes(response)
    assert server_counts == {
        **before,
        "decode": before["decode"] + 1,
        "encode": before["encode"] + 1,
    }


def test_other_messages_go_through_betterproto2() -> None:
    codec = SizeLimitedCodec()
    request = env_pb.HandshakeRequest()
    before = dict(server_counts)
    assert codec.decode(bytes(request), env_pb.HandshakeRequest) == request
    assert server_counts == before
