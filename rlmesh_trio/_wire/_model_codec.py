"""Hand-rolled protobuf for the model server's hot path: Predict and GroupedPredict
in, Predict and GroupedPredict out.

betterproto2 spends 100+ µs parsing one ``JoinRequest`` and as much encoding one
``JoinResponse``, several times the cost of the predict itself; a grouped predict
of 32 routes cost it about 5 ms both ways (issue 23), more than the fused forward
pass it carries. Every other arm falls back to it
(``tests/wire/test_model_server_fastwire.py`` checks both ways).
"""

from __future__ import annotations

from .._protocol import model_pb
from ._client_codec import put_context
from ._pb import (
    MODEL_COUNTERS,
    Fallback,
    JoinCodec,
    blob,
    decode_context,
    decode_space_value,
    fields,
    integer,
    key,
    number,
    put_len,
    put_space_value,
    signed64,
    text,
)

__all__ = ["decode_join_request", "encode_join_response"]

_I_EPISODE = number(model_pb.EpisodeInfo, "episode_id")
_I_SEED = number(model_pb.EpisodeInfo, "seed")
_P_CONTEXT, _P_OBSERVATION, _P_INFO = (
    number(model_pb.PredictRequest, name) for name in ("context", "observation", "episode_info")
)
_G_GROUPS = number(model_pb.GroupedPredictRequest, "groups")

# ---------------------------------------------------------------------- decoding


def _episode_info(data: bytes) -> model_pb.EpisodeInfo:
    episode_id: str | None = None
    seed: int | None = None
    for field, _wire, value in fields(data):
        if field == _I_EPISODE and episode_id is None:
            episode_id = text(value)
        elif field == _I_SEED and seed is None:
            seed = signed64(integer(value))
        else:
            raise Fallback
    return model_pb.EpisodeInfo(episode_id=episode_id or "", seed=seed)


def _predict(data: bytes) -> model_pb.PredictRequest:
    context = None
    observation = None
    infos = []
    for field, _wire, value in fields(data):
        if field == _P_INFO:
            infos.append(_episode_info(blob(value)))
        elif field == _P_CONTEXT and context is None:
            context = decode_context(blob(value))
        elif field == _P_OBSERVATION and observation is None:
            observation = decode_space_value(blob(value))
        else:
            raise Fallback
    return model_pb.PredictRequest(context=context, observation=observation, episode_info=infos)


def _grouped(data: bytes) -> model_pb.GroupedPredictRequest:
    groups = []
    for field, _wire, value in fields(data):
        if field != _G_GROUPS:
            raise Fallback
        groups.append(_predict(blob(value)))
    return model_pb.GroupedPredictRequest(groups=groups)


# ---------------------------------------------------------------------- encoding

_K_PR_CONTEXT = key(model_pb.PredictResponse, "context")
_K_PR_ACTIONS = key(model_pb.PredictResponse, "actions")


def _encode_predict(predict: model_pb.PredictResponse) -> bytearray:
    out = bytearray()
    if predict.context is not None:
        put_context(out, _K_PR_CONTEXT, predict.context)
    for frame in predict.actions:
        put_space_value(out, _K_PR_ACTIONS, frame)
    return out


_K_GR_RESULTS = key(model_pb.GroupedPredictResponse, "results")
_K_RESULT_RESPONSE = key(model_pb.GroupedPredictResult, "response")
_K_RESULT_ERROR = key(model_pb.GroupedPredictResult, "error")


def _encode_grouped(grouped: model_pb.GroupedPredictResponse) -> bytearray:
    out = bytearray()
    for result in grouped.results:
        body = bytearray()
        # A oneof holds at most one arm; a result with neither is an empty message.
        if result.response is not None:
            put_len(body, _K_RESULT_RESPONSE, _encode_predict(result.response))
        elif result.error is not None:
            put_len(body, _K_RESULT_ERROR, bytes(result.error))  # rare: betterproto2's bytes
        put_len(out, _K_GR_RESULTS, body)
    return out


_CODEC = JoinCodec(
    model_pb.JoinRequest,
    {"predict": _predict, "grouped_predict": _grouped},
    model_pb.JoinResponse,
    {"predict": _encode_predict, "grouped_predict": _encode_grouped},
    MODEL_COUNTERS,
)
decode_join_request = _CODEC.decode
encode_join_response = _CODEC.encode
