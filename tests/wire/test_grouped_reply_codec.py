"""A grouped predict's reply decoded against the requests sent (the client's batched path)."""

from __future__ import annotations

from rlmesh_trio._protocol import model_pb, spaces_pb
from rlmesh_trio._wire._client_codec import (
    GroupedEnvelope,
    decode_grouped_results,
    decode_model_reply,
    fast_path_counts,
)


def _request(i: int) -> model_pb.PredictRequest:
    context = model_pb.AdapterContext(session_id="s", env_id=f"e{i}", request_id=f"e{i}:predict:7")
    return model_pb.PredictRequest(context=context)


def _action(i: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[bytes([i])])


def test_results_reuse_the_contexts_sent_and_keep_errors_and_foreign_echoes() -> None:
    sent = [_request(i) for i in range(3)]
    echoed = model_pb.AdapterContext(session_id="s", env_id="e2", request_id="other")
    results = [
        model_pb.GroupedPredictResult(
            response=model_pb.PredictResponse(context=sent[0].context, actions=[_action(0)])
        ),
        model_pb.GroupedPredictResult(error=model_pb.ModelError(message="bad group 1")),
        model_pb.GroupedPredictResult(
            response=model_pb.PredictResponse(context=echoed, actions=[_action(2)])
        ),
    ]
    data = bytes(
        model_pb.JoinResponse(
            request_id="g",
            grouped_predict=model_pb.GroupedPredictResponse(results=results),
            decode_ns=5,
        )
    )
    envelope = decode_model_reply(data)
    assert isinstance(envelope, GroupedEnvelope)
    assert (envelope.request_id, envelope.decode_ns, envelope.user_ns) == ("g", 5, 0)
    outcomes = decode_grouped_results(envelope.body, sent)
    first, error, foreign = outcomes
    assert isinstance(first, model_pb.PredictResponse) and first.context is sent[0].context
    assert first.actions == [_action(0)]
    assert error == model_pb.ModelError(message="bad group 1")
    assert isinstance(foreign, model_pb.PredictResponse) and foreign.context == echoed


def test_other_replies_and_odd_shapes_take_betterproto2() -> None:
    single = model_pb.JoinResponse(
        request_id="p", predict=model_pb.PredictResponse(actions=[_action(1)])
    )
    assert decode_model_reply(bytes(single)) == single
    # A result with neither arm: betterproto2 decides, and says so (None).
    body = bytes(model_pb.GroupedPredictResponse(results=[model_pb.GroupedPredictResult()]))
    before = fast_path_counts["fallback"]
    assert decode_grouped_results(body, [_request(0)]) == [None]
    assert fast_path_counts["fallback"] == before + 1
