"""Hand-rolled protobuf for the model server's hot path: Predict in, Predict out.

betterproto2 spends 100+ µs parsing one ``JoinRequest`` and as much encoding
one ``JoinResponse`` (a reflective walk over every field), several times the
cost of the predict itself. A served route sends one Predict per step, so
this module decodes a ``JoinRequest`` carrying ``predict`` and encodes a
``JoinResponse`` carrying ``predict`` directly, producing the same message
objects and the same bytes betterproto2 would. Every other shape -- another
``oneof`` arm, unknown fields, a repeated singular field, an unexpected wire
type -- falls back to betterproto2, so correctness never depends on this
module being complete. ``tests/wire/test_model_server_fastwire.py`` checks both
directions against betterproto2 over generated messages.
"""

from __future__ import annotations

from typing import Any

from .._wire import model_pb
from ._pb import (
    VARINT,
    Fallback,
    blob,
    decode_space_value,
    fields,
    integer,
    key,
    number,
    put_len,
    put_space_value,
    put_varint,
    signed64,
    text,
)

__all__ = ["decode_join_request", "encode_join_response"]

# ---------------------------------------------------------------------- decoding

_CTX = model_pb.AdapterContext
_CONTEXT_FIELDS = {
    number(_CTX, name): index for index, name in enumerate(("session_id", "env_id", "request_id"))
}
_K_SESSION, _K_ENV, _K_REQUEST = (
    key(_CTX, name) for name in ("session_id", "env_id", "request_id")
)
_I_EPISODE = number(model_pb.EpisodeInfo, "episode_id")
_I_SEED = number(model_pb.EpisodeInfo, "seed")
_P_CONTEXT, _P_OBSERVATION, _P_INFO = (
    number(model_pb.PredictRequest, name) for name in ("context", "observation", "episode_info")
)
_J_PREDICT = number(model_pb.JoinRequest, "predict")
_J_RID = number(model_pb.JoinRequest, "request_id")
_K_PR_CONTEXT = key(model_pb.PredictResponse, "context")
_K_PR_ACTIONS = key(model_pb.PredictResponse, "actions")
_JR = model_pb.JoinResponse
_K_JR_PREDICT = key(_JR, "predict")
_K_JR_RID = key(_JR, "request_id")
_K_JR_TOTAL = key(_JR, "endpoint_total_ns", VARINT)


def _context(data: bytes) -> model_pb.AdapterContext:
    texts = ["", "", ""]
    seen = 0
    for field, _wire, value in fields(data):
        index = _CONTEXT_FIELDS.get(field)
        if index is None or seen & (1 << index):
            raise Fallback
        seen |= 1 << index
        texts[index] = text(value)
    return model_pb.AdapterContext(session_id=texts[0], env_id=texts[1], request_id=texts[2])


def _episode_info(data: bytes) -> model_pb.EpisodeInfo:
    episode_id = ""
    seed: int | None = None
    seen = 0
    for field, _wire, value in fields(data):
        if field not in (_I_EPISODE, _I_SEED) or seen & (1 << field):
            raise Fallback
        seen |= 1 << field
        if field == _I_EPISODE:
            episode_id = text(value)
        else:
            seed = signed64(integer(value))
    return model_pb.EpisodeInfo(episode_id=episode_id, seed=seed)


def _predict(data: bytes) -> model_pb.PredictRequest:
    context = None
    observation = None
    infos = []
    for field, _wire, value in fields(data):
        if field == _P_INFO:
            infos.append(_episode_info(blob(value)))
        elif field == _P_CONTEXT and context is None:
            context = _context(blob(value))
        elif field == _P_OBSERVATION and observation is None:
            observation = decode_space_value(blob(value))
        else:
            raise Fallback
    return model_pb.PredictRequest(context=context, observation=observation, episode_info=infos)


def decode_join_request(data: bytes) -> model_pb.JoinRequest:
    """Parse a model ``JoinRequest``; fast for ``predict``, betterproto2 for the rest.

    Raises whatever betterproto2 raises for bytes it cannot parse.
    """
    try:
        request_id = ""
        predict = None
        for field, _wire, value in fields(data):
            if field == _J_PREDICT and predict is None:
                predict = _predict(blob(value))
            elif field == _J_RID and not request_id:
                request_id = text(value)
            else:
                raise Fallback
        if predict is not None:
            return model_pb.JoinRequest(request_id=request_id, predict=predict)
    except Fallback:
        pass
    return model_pb.JoinRequest.parse(data)


# ---------------------------------------------------------------------- encoding


def _encode_context(context: model_pb.AdapterContext) -> bytearray:
    out = bytearray()
    for tag, field_text in (
        (_K_SESSION, context.session_id),
        (_K_ENV, context.env_id),
        (_K_REQUEST, context.request_id),
    ):
        if field_text:
            put_len(out, tag, field_text.encode())
    return out


def _encode_predict(predict: model_pb.PredictResponse) -> bytearray:
    out = bytearray()
    if predict.context is not None:
        put_len(out, _K_PR_CONTEXT, _encode_context(predict.context))
    for frame in predict.actions:
        put_space_value(out, _K_PR_ACTIONS, frame)
    return out


_OTHER_ARMS = (
    "resolve_adapter",
    "release_adapter",
    "close",
    "grouped_predict",
    "reset_adapter",
    "error",
)
#: The additive uint64 counters of 0.1.0 (fields 11-15, 17, 18), as (encoded key, name).
_COUNTERS = tuple(
    (key(_JR, name, VARINT), name)
    for name in (
        "decode_ns",
        "user_ns",
        "encode_ns",
        "adapter_ns",
        "in_flight",
        "held_episodes",
        "held_bytes",
    )
)


def encode_join_response(response: model_pb.JoinResponse) -> bytes:
    """Serialise a model ``JoinResponse``; fast for ``predict``, betterproto2 for the rest."""
    predict = response.predict
    if predict is not None and _only_predict(response):
        try:
            out = bytearray()
            put_len(out, _K_JR_PREDICT, _encode_predict(predict))
            if response.request_id:
                put_len(out, _K_JR_RID, response.request_id.encode())
            if response.endpoint_total_ns is not None:
                out += _K_JR_TOTAL
                put_varint(out, response.endpoint_total_ns)
            for key, name in _COUNTERS:
                value = getattr(response, name)
                if value:
                    out += key
                    put_varint(out, value)
            return bytes(out)
        except Fallback:
            pass
    return bytes(response)


def _only_predict(response: Any) -> bool:
    for name in _OTHER_ARMS:
        if getattr(response, name) is not None:
            return False
    return True
