"""A model client's Join codec: echoed contexts come back as the objects sent, and a
predict's reply is a light envelope that reads as betterproto2's message does."""

from __future__ import annotations

from rlmesh_trio._protocol import model_pb, spaces_pb
from rlmesh_trio._wire._client_codec import (
    ModelJoinCodec,
    PredictEnvelope,
    decode_model_reply,
    fast_path_counts,
)
from rlmesh_trio._wire._pb import MODEL_COUNTERS


def _predict(request_id: str) -> model_pb.PredictRequest:
    context = model_pb.AdapterContext(session_id="s", env_id="e", request_id=request_id)
    return model_pb.PredictRequest(
        context=context, observation=spaces_pb.SpaceValue(leaves=[b"\x01"])
    )


def _reply(context: model_pb.AdapterContext, **timings: int) -> bytes:
    action = spaces_pb.SpaceValue(leaves=[b"\x00" * 8])
    predict = model_pb.PredictResponse(context=context, actions=[action])
    return bytes(model_pb.JoinResponse(request_id=context.request_id, predict=predict, **timings))


def test_the_echo_of_a_sent_context_is_that_object_once() -> None:
    codec = ModelJoinCodec()
    request = _predict("e:step:1")
    assert request.context is not None
    sent = codec.encode_predict("e:step:1", request)
    assert sent == bytes(model_pb.JoinRequest(request_id="e:step:1", predict=request))
    echo = model_pb.AdapterContext(session_id="s", env_id="e", request_id="e:step:1")
    first = codec.decode_reply(_reply(echo))
    assert isinstance(first, PredictEnvelope) and first.predict.context is request.context
    # Matched once: a second echo of the same bytes is decoded afresh (equal, not the same).
    second = codec.decode_reply(_reply(echo))
    assert isinstance(second, PredictEnvelope)
    assert second.predict.context == request.context
    assert second.predict.context is not request.context


def test_a_foreign_echo_is_decoded_and_the_light_envelope_reads_as_betterproto2() -> None:
    codec = ModelJoinCodec()
    request = _predict("e:step:2")
    codec.encode_predict("e:step:2", request)
    other = model_pb.AdapterContext(session_id="s", env_id="e", request_id="someone else")
    data = _reply(other, decode_ns=7, endpoint_total_ns=9)
    before = fast_path_counts["decode"]
    envelope = codec.decode_reply(data)
    assert fast_path_counts["decode"] == before + 1
    assert isinstance(envelope, PredictEnvelope) and envelope.data == data
    message = model_pb.JoinResponse.parse(data)
    assert envelope.predict == message.predict and envelope.predict.context == other
    for name in ("request_id", "endpoint_total_ns", *MODEL_COUNTERS):
        assert getattr(envelope, name) == getattr(message, name), name
    # The module's decoder still hands out betterproto2's message itself.
    assert decode_model_reply(data) == message


def test_an_envelope_the_hand_path_does_not_know_falls_back() -> None:
    codec = ModelJoinCodec()
    data = bytes(model_pb.JoinResponse(request_id="x", error=model_pb.ModelError(message="no")))
    before = fast_path_counts["fallback"]
    decoded = codec.decode_reply(data)
    assert fast_path_counts["fallback"] == before + 1
    assert decoded == model_pb.JoinResponse.parse(data)
