"""Hand codecs for the client's hot Join messages: Step/Predict out, Step/Reset/Predict in.

A route step sends a step and a predict request and receives their replies;
betterproto2 spends 40-120 µs on each. The output equals betterproto2's bytes
and objects; any other shape falls back to it (see :mod:`._pb`). Encoders write
the known fields only: unknown fields carried in from one peer never reach another.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from .._protocol import env_pb, model_pb, spaces_pb
from . import _pb, _skim
from ._pb import Fallback, key, number, put_len, put_space_value, put_text, put_varint

__all__ = [
    "GroupOutcome",
    "GroupedEnvelope",
    "ModelJoinCodec",
    "PredictEnvelope",
    "decode_env_response",
    "decode_grouped_results",
    "decode_model_reply",
    "decode_model_response",
    "encode_env_step",
    "encode_model_grouped_predict",
    "encode_model_predict",
    "fast_path_counts",
    "put_context",
]

#: How often each hot path was taken (a test proves the fast path runs, not only agrees).
fast_path_counts: dict[str, int] = {"encode": 0, "decode": 0, "fallback": 0}

_K_ENV_STEP = key(env_pb.JoinRequest, "step")
_K_ENV_RID = key(env_pb.JoinRequest, "request_id")
_K_STEP_ACTION = key(env_pb.StepRequest, "action")
_K_STEP_TIMEOUT = key(env_pb.StepRequest, "timeout_ms", _pb.VARINT)
_K_STEP_INDICES = key(env_pb.StepRequest, "env_indices")
_K_STEP_EPISODES = key(env_pb.StepRequest, "episode_ids")
_K_MODEL_PREDICT = key(model_pb.JoinRequest, "predict")
_K_MODEL_GROUPED = key(model_pb.JoinRequest, "grouped_predict")
_K_MODEL_RID = key(model_pb.JoinRequest, "request_id")
_K_GROUPS = key(model_pb.GroupedPredictRequest, "groups")
_K_PREDICT_CONTEXT = key(model_pb.PredictRequest, "context")
_K_PREDICT_OBSERVATION = key(model_pb.PredictRequest, "observation")
_K_PREDICT_INFO = key(model_pb.PredictRequest, "episode_info")
_K_CTX_SESSION = key(model_pb.AdapterContext, "session_id")
_K_CTX_ENV = key(model_pb.AdapterContext, "env_id")
_K_CTX_REQUEST = key(model_pb.AdapterContext, "request_id")
_K_INFO_EPISODE = key(model_pb.EpisodeInfo, "episode_id")
_K_INFO_SEED = key(model_pb.EpisodeInfo, "seed", _pb.VARINT)


def _join(arm: bytes, body: bytearray, rid: bytes, request_id: str) -> bytes:
    out = bytearray()
    put_len(out, arm, body)
    put_text(out, rid, request_id)
    fast_path_counts["encode"] += 1
    return bytes(out)


def encode_env_step(request_id: str, step: env_pb.StepRequest) -> bytes:
    """``JoinRequest{step, request_id}`` as betterproto2 encodes it."""
    body = bytearray()
    if step.action is not None:
        put_space_value(body, _K_STEP_ACTION, step.action)
    if step.timeout_ms:
        body += _K_STEP_TIMEOUT
        put_varint(body, step.timeout_ms)
    if step.env_indices:
        _pb.put_packed(body, _K_STEP_INDICES, step.env_indices)
    for episode_id in step.episode_ids:
        put_len(body, _K_STEP_EPISODES, episode_id.encode())
    return _join(_K_ENV_STEP, body, _K_ENV_RID, request_id)


# A route's session and env ids, and an episode's id and seed, repeat on every step:
# their encodings are kept (bounded; cleared when full) instead of rebuilt per request.
_CACHE_LIMIT = 4096
_route_prefix: dict[tuple[str, str], bytes] = {}
_episode_info: dict[tuple[str, int | None], bytes] = {}
_Key = TypeVar("_Key", bound=Hashable)


def _cached(cache: dict[_Key, bytes], key: _Key, build: Callable[[_Key], bytes]) -> bytes:
    encoded = cache.get(key)
    if encoded is None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        encoded = cache[key] = build(key)
    return encoded


def _route_bytes(route: tuple[str, str]) -> bytes:
    out = bytearray()
    put_text(out, _K_CTX_SESSION, route[0])
    put_text(out, _K_CTX_ENV, route[1])
    return bytes(out)


def _context_fields(context: model_pb.AdapterContext) -> bytearray:
    """An ``AdapterContext``'s encoded fields (the body of its field)."""
    route = (context.session_id, context.env_id)
    context_fields = bytearray(_cached(_route_prefix, route, _route_bytes))
    put_text(context_fields, _K_CTX_REQUEST, context.request_id)
    return context_fields


def put_context(out: bytearray, tag: bytes, context: model_pb.AdapterContext) -> None:
    """Append an ``AdapterContext`` field (the model server's replies carry one too)."""
    put_len(out, tag, _context_fields(context))


def _info_bytes(episode: tuple[str, int | None]) -> bytes:
    body = bytearray()
    put_text(body, _K_INFO_EPISODE, episode[0])
    if episode[1] is not None:
        body += _K_INFO_SEED
        put_varint(body, episode[1])
    out = bytearray()
    put_len(out, _K_PREDICT_INFO, body)
    return bytes(out)


def _predict_body(
    predict: model_pb.PredictRequest,
    sent: dict[bytes, model_pb.AdapterContext] | None = None,
) -> bytearray:
    """A ``PredictRequest``'s fields; its context's encoding goes into ``sent`` as a key."""
    body = bytearray()
    context = predict.context
    if context is not None:
        fields = _context_fields(context)
        if sent is not None:
            if len(sent) >= _CACHE_LIMIT:
                sent.clear()  # abandoned requests' entries: the echo is then decoded
            sent[bytes(fields)] = context
        put_len(body, _K_PREDICT_CONTEXT, fields)
    if predict.observation is not None:
        put_space_value(body, _K_PREDICT_OBSERVATION, predict.observation)
    for info in predict.episode_info:
        body += _cached(_episode_info, (info.episode_id, info.seed), _info_bytes)
    return body


def encode_model_predict(request_id: str, predict: model_pb.PredictRequest) -> bytes:
    """``JoinRequest{predict, request_id}`` as betterproto2 encodes it."""
    return _join(_K_MODEL_PREDICT, _predict_body(predict), _K_MODEL_RID, request_id)


def encode_model_grouped_predict(request_id: str, groups: list[model_pb.PredictRequest]) -> bytes:
    """``JoinRequest{grouped_predict{groups}, request_id}`` as betterproto2 encodes it."""
    body = bytearray()
    for group in groups:
        put_len(body, _K_GROUPS, _predict_body(group))
    return _join(_K_MODEL_GROUPED, body, _K_MODEL_RID, request_id)


_STEP = env_pb.StepResponse
_F_STEP_OBS = number(_STEP, "observation")
_F_STEP_REWARDS = number(_STEP, "rewards")
_F_STEP_TERMINATED = number(_STEP, "terminated_mask")
_F_STEP_TRUNCATED = number(_STEP, "truncated_mask")
_F_STEP_INFOS = number(_STEP, "infos")
_F_STEP_COMPLETED = number(_STEP, "completed_episodes")
_F_STEP_INDICES = number(_STEP, "env_indices")
_ONE_DOUBLE = struct.Struct("<d")
_LEN = _pb.LEN
_VARINT = _pb.VARINT
_read_varint = _pb.read_varint


def _meta_map(data: bytes) -> spaces_pb.MetaMap:
    # infos are usually present but empty; skip the parser for those
    return _skim.parse(spaces_pb.MetaMap, data) if data else spaces_pb.MetaMap()


def _decode_step(data: bytes) -> env_pb.StepResponse:
    # Walked inline (one per env step): keys, sizes and most values are one byte.
    observation = infos = terminated = truncated = None
    rewards: list[float] = []
    completed: list[env_pb.EpisodeMetadata] = []
    env_indices: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _read_varint(data, pos - 1)
        field = tag >> 3
        if tag & 7 != _LEN:
            if tag & 7 != _VARINT or field != _F_STEP_INDICES:
                raise Fallback
            value, pos = _read_varint(data, pos)
            env_indices.append(value)
            continue
        size = data[pos]
        pos += 1
        if size >= 0x80:
            size, pos = _read_varint(data, pos - 1)
        stop = pos + size
        if stop > end:
            raise Fallback
        if field == _F_STEP_OBS and observation is None:
            observation = _pb.decode_space_value(data[pos:stop])
        elif field == _F_STEP_REWARDS:
            if size == 8:
                rewards.append(_ONE_DOUBLE.unpack_from(data, pos)[0])
            elif size % 8:
                raise Fallback
            else:
                rewards.extend(struct.unpack_from(f"<{size // 8}d", data, pos))
        elif field == _F_STEP_TERMINATED:
            terminated = data[pos:stop]
        elif field == _F_STEP_TRUNCATED:
            truncated = data[pos:stop]
        elif field == _F_STEP_INFOS and infos is None:
            infos = _meta_map(data[pos:stop])
        elif field == _F_STEP_COMPLETED:
            completed.append(_skim.parse(env_pb.EpisodeMetadata, data[pos:stop]))
        elif field == _F_STEP_INDICES:
            env_indices.extend(_pb.packed_varints(data[pos:stop]))
        else:
            raise Fallback  # a repeated singular message merges: leave it to betterproto2
        pos = stop
    return _STEP(
        observation=observation,
        rewards=rewards,
        terminated_mask=b"" if terminated is None else terminated,
        truncated_mask=b"" if truncated is None else truncated,
        infos=infos,
        completed_episodes=completed,
        env_indices=env_indices,
    )


_F_RESET_OBS = number(env_pb.ResetResponse, "observation")
_F_RESET_INFOS = number(env_pb.ResetResponse, "infos")


def _decode_reset(data: bytes) -> env_pb.ResetResponse:
    observation = infos = None
    for field, _wire, value in _pb.fields(data):
        raw = _pb.blob(value)
        if field == _F_RESET_OBS and observation is None:
            observation = _pb.decode_space_value(raw)
        elif field == _F_RESET_INFOS and infos is None:
            infos = _meta_map(raw)
        else:
            raise Fallback
    return env_pb.ResetResponse(observation=observation, infos=infos)


_F_PREDICT_CONTEXT = number(model_pb.PredictResponse, "context")
_F_PREDICT_ACTIONS = number(model_pb.PredictResponse, "actions")


def _decode_predict(
    data: bytes,
    sent: model_pb.AdapterContext | None = None,
    contexts: dict[bytes, model_pb.AdapterContext] | None = None,
) -> model_pb.PredictResponse:
    # An echoed context that encodes exactly as ``sent`` did (or as one of ``contexts``,
    # keyed by their encodings) is that object itself: no new object, and the caller's
    # check of the echo is an identity test.
    context = None
    actions = []
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        if tag & 7 != _LEN:
            raise Fallback  # also multi-byte keys: no such field in the schema
        size = data[pos + 1]
        pos += 2
        if size >= 0x80:
            size, pos = _read_varint(data, pos - 1)
        stop = pos + size
        if stop > end:
            raise Fallback
        field = tag >> 3
        if field == _F_PREDICT_ACTIONS:
            actions.append(_pb.decode_space_value(data[pos:stop]))
        elif field == _F_PREDICT_CONTEXT and context is None:
            raw = data[pos:stop]
            if sent is not None and raw == _context_fields(sent):
                context = sent
            elif contexts is None or (context := contexts.pop(raw, None)) is None:
                context = _pb.decode_context(raw)
        else:
            raise Fallback
        pos = stop
    return model_pb.PredictResponse(context=context, actions=actions)


_F_RESULTS = number(model_pb.GroupedPredictResponse, "results")
_F_RESULT_RESPONSE = number(model_pb.GroupedPredictResult, "response")
_F_RESULT_ERROR = number(model_pb.GroupedPredictResult, "error")


def _decode_grouped(data: bytes) -> model_pb.GroupedPredictResponse:
    results = []
    for field, _wire, value in _pb.fields(data):
        if field != _F_RESULTS:
            raise Fallback
        outcome = _pb.fields(_pb.blob(value))
        if len(outcome) != 1:
            raise Fallback  # empty, or both arms: leave the oneof rules to betterproto2
        arm, _arm_wire, body = outcome[0]
        if arm == _F_RESULT_RESPONSE:
            result = model_pb.GroupedPredictResult(response=_decode_predict(_pb.blob(body)))
        elif arm == _F_RESULT_ERROR:
            result = model_pb.GroupedPredictResult(
                error=_skim.parse(model_pb.ModelError, _pb.blob(body))
            )
        else:
            raise Fallback
        results.append(result)
    return model_pb.GroupedPredictResponse(results=results)


def _varint_fields(message: type, names: tuple[str, ...]) -> dict[int, str]:
    return {number(message, name) << 3 | _VARINT: name for name in names}


_ENV_COUNTERS = _varint_fields(env_pb.JoinResponse, ("endpoint_total_ns", *_pb.ENV_COUNTERS))
_MODEL_COUNTERS = _varint_fields(model_pb.JoinResponse, ("endpoint_total_ns", *_pb.MODEL_COUNTERS))
_Arms = dict[int, tuple[str, Callable[[bytes], Any]]]
_ENV_ARMS: _Arms = {
    number(env_pb.JoinResponse, "reset") << 3 | _LEN: ("reset", _decode_reset),
    number(env_pb.JoinResponse, "step") << 3 | _LEN: ("step", _decode_step),
}
_MODEL_ARMS: _Arms = {
    number(model_pb.JoinResponse, "predict") << 3 | _LEN: ("predict", _decode_predict),
    number(model_pb.JoinResponse, "grouped_predict") << 3 | _LEN: (
        "grouped_predict",
        _decode_grouped,
    ),
}
_F_ENV_RID = number(env_pb.JoinResponse, "request_id") << 3 | _LEN
_F_MODEL_RID = number(model_pb.JoinResponse, "request_id") << 3 | _LEN


def _decode_envelope(
    data: bytes, arms: _Arms, counters: dict[int, str], rid: int
) -> dict[str, Any]:
    # Walked inline rather than through _pb.fields: one envelope per response.
    # ``arms``, ``counters`` and ``rid`` are keyed by the whole field key (number
    # and wire type), so one lookup both finds a field and checks its wire type.
    kwargs: dict[str, Any] = {}
    arm_seen = False
    pos, end = 0, len(data)
    while pos < end:
        key = data[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _read_varint(data, pos - 1)
        counter = counters.get(key)
        if counter is not None:
            # Timings take 2-4 bytes: the first three are read unrolled, not in a call.
            value = data[pos]
            if value < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                value = value & 0x7F | data[pos + 1] << 7
                pos += 2
            elif data[pos + 2] < 0x80:
                value = value & 0x7F | (data[pos + 1] & 0x7F) << 7 | data[pos + 2] << 14
                pos += 3
            else:
                value, pos = _read_varint(data, pos)
            kwargs[counter] = value
            continue
        size = data[pos]
        pos += 1
        if size >= 0x80:
            size, pos = _read_varint(data, pos - 1)
        stop = pos + size
        if stop > end:
            raise Fallback
        if key == rid:
            kwargs["request_id"] = data[pos:stop].decode()
        else:
            arm = arms.get(key)
            if arm is None or arm_seen:
                raise Fallback  # an unknown field or wire type, or a second arm
            kwargs[arm[0]] = arm[1](data[pos:stop])
            arm_seen = True
        pos = stop
    if not arm_seen:
        raise Fallback
    return kwargs


class GroupedEnvelope:
    """A model ``JoinResponse`` whose arm is a grouped predict, its results still encoded.

    Made by :func:`decode_model_reply`; :func:`decode_grouped_results` decodes
    ``body`` against the predicts that were sent, straight into their replies.
    ``data`` is the whole message (for a caller that wants betterproto2's view).
    """

    __slots__ = ("body", "data", "request_id", *_MODEL_COUNTERS.values())
    body: bytes
    request_id: str
    endpoint_total_ns: int | None

    def __init__(self, data: bytes, fields: dict[str, Any]) -> None:
        self.data = data
        self.request_id = ""
        self.endpoint_total_ns = None
        for name in _MODEL_COUNTERS.values():
            if name != "endpoint_total_ns":
                setattr(self, name, 0)
        for name, value in fields.items():
            setattr(self, name, value)


_K_REPLY_PREDICT = number(model_pb.JoinResponse, "predict") << 3 | _LEN
_K_REPLY_GROUPED = number(model_pb.JoinResponse, "grouped_predict") << 3 | _LEN


def _reply_arms(contexts: dict[bytes, model_pb.AdapterContext] | None) -> _Arms:
    """A model reply's hand-decoded arms: a predict (its echoed context looked up in
    ``contexts``), or a grouped predict's body, kept encoded for :class:`GroupedEnvelope`."""

    def predict(data: bytes) -> model_pb.PredictResponse:
        return _decode_predict(data, None, contexts)

    return {_K_REPLY_PREDICT: ("predict", predict), _K_REPLY_GROUPED: ("body", bytes)}


class PredictEnvelope:
    """A model ``JoinResponse`` whose arm is a predict, decoded by hand (no error arm).

    Made by :meth:`ModelJoinCodec.decode_reply`: ``predict``, the envelope's
    ``request_id`` and timings (those the peer left out read 0, and
    ``endpoint_total_ns`` ``None``, as betterproto2 reads them). ``data`` is the
    whole message (for a caller that wants betterproto2's view).
    """

    request_id: str = ""
    endpoint_total_ns: int | None = None
    decode_ns: int = 0
    user_ns: int = 0
    encode_ns: int = 0
    adapter_ns: int = 0
    in_flight: int = 0
    held_episodes: int = 0
    held_bytes: int = 0
    predict: model_pb.PredictResponse

    def __init__(self, data: bytes, fields: dict[str, Any]) -> None:
        self.data = data
        # The unset fields keep the class defaults above (one C call, not a setattr each).
        self.__dict__.update(fields)


#: What a model reply decodes to: betterproto2's message, or a hand-decoded envelope.
ModelReply = model_pb.JoinResponse | GroupedEnvelope | PredictEnvelope


def _decode_model_reply(data: bytes, arms: _Arms, light: bool) -> ModelReply:
    # One walk of the envelope whichever arm it carries (see decode_model_reply); with
    # ``light`` a predict's reply comes as a PredictEnvelope (no 16-field message built).
    try:
        fields = _decode_envelope(data, arms, _MODEL_COUNTERS, _F_MODEL_RID)
    except _pb.DECODE_ERRORS:
        fast_path_counts["fallback"] += 1
        return _skim.parse(model_pb.JoinResponse, data)
    fast_path_counts["decode"] += 1
    if "body" in fields:
        return GroupedEnvelope(data, fields)
    if light:
        return PredictEnvelope(data, fields)
    return model_pb.JoinResponse(**fields)


_PLAIN_REPLY_ARMS = _reply_arms(None)


def decode_model_reply(data: bytes) -> model_pb.JoinResponse | GroupedEnvelope:
    """A model ``JoinResponse``, or a :class:`GroupedEnvelope` for a grouped predict's reply.

    Raises:
        Exception: whatever betterproto2 raises for bytes it cannot parse.
    """
    decoded = _decode_model_reply(data, _PLAIN_REPLY_ARMS, False)
    assert not isinstance(decoded, PredictEnvelope)
    return decoded


class ModelJoinCodec:
    """One model client's hot Join messages: predicts out, replies in.

    A predict reply's echoed context that encodes as one this codec sent (and
    has not matched yet) is that very ``AdapterContext``: nothing decoded, and
    the caller's check of the echo is an identity test. At most
    :data:`_CACHE_LIMIT` contexts are remembered (abandoned requests' are
    dropped when full; their echoes are then decoded).
    """

    __slots__ = ("_arms", "_sent")

    def __init__(self) -> None:
        self._sent: dict[bytes, model_pb.AdapterContext] = {}
        self._arms = _reply_arms(self._sent)

    def encode_predict(self, request_id: str, predict: model_pb.PredictRequest) -> bytes:
        """``JoinRequest{predict, request_id}`` as betterproto2 encodes it."""
        return _join(_K_MODEL_PREDICT, _predict_body(predict, self._sent), _K_MODEL_RID, request_id)

    def decode_reply(self, data: bytes) -> ModelReply:
        """:func:`decode_model_reply`, with the echoed contexts of this codec's predicts,
        and a predict's reply as a :class:`PredictEnvelope`.

        Raises:
            Exception: whatever betterproto2 raises for bytes it cannot parse.
        """
        return _decode_model_reply(data, self._arms, True)


#: One group's outcome in a grouped reply (``None``: the result had neither arm).
GroupOutcome = model_pb.PredictResponse | model_pb.ModelError | None


def decode_grouped_results(
    body: bytes, sent: Sequence[model_pb.PredictRequest]
) -> list[GroupOutcome]:
    """A grouped reply's results, each a ``PredictResponse`` or a ``ModelError``.

    A result whose context encodes as its request's did carries that request's
    own context object. Raises: whatever betterproto2 raises for bytes it cannot parse.
    """
    try:
        out: list[GroupOutcome] = []
        for index, (field, _wire, value) in enumerate(_pb.fields(body)):
            outcome = _pb.fields(_pb.blob(value))
            if field != _F_RESULTS or len(outcome) != 1:
                raise Fallback  # empty, or both arms: leave the oneof rules to betterproto2
            arm, _arm_wire, inner = outcome[0]
            if arm == _F_RESULT_RESPONSE:
                context = sent[index].context if index < len(sent) else None
                out.append(_decode_predict(_pb.blob(inner), context))
            elif arm == _F_RESULT_ERROR:
                out.append(_skim.parse(model_pb.ModelError, _pb.blob(inner)))
            else:
                raise Fallback
        return out
    except _pb.DECODE_ERRORS:
        fast_path_counts["fallback"] += 1
    results = _skim.parse(model_pb.GroupedPredictResponse, body).results
    return [r.error if r.error is not None else r.response for r in results]


_Response = TypeVar("_Response", env_pb.JoinResponse, model_pb.JoinResponse)


def _decode_response(
    message: type[_Response], data: bytes, arms: _Arms, counters: dict[int, str], rid: int
) -> _Response:
    try:
        fields = _decode_envelope(data, arms, counters, rid)
    except _pb.DECODE_ERRORS:
        fast_path_counts["fallback"] += 1
        return _skim.parse(message, data)
    fast_path_counts["decode"] += 1
    return message(**fields)


def decode_env_response(data: bytes) -> env_pb.JoinResponse:
    """Parse an env ``JoinResponse``; reset/step replies take the hand path.

    Raises:
        Exception: whatever betterproto2 raises for bytes it cannot parse.
    """
    return _decode_response(env_pb.JoinResponse, data, _ENV_ARMS, _ENV_COUNTERS, _F_ENV_RID)


def decode_model_response(data: bytes) -> model_pb.JoinResponse:
    """Parse a model ``JoinResponse``; predict and grouped-predict replies take the hand path.

    Raises:
        Exception: whatever betterproto2 raises for bytes it cannot parse.
    """
    return _decode_response(model_pb.JoinResponse, data, _MODEL_ARMS, _MODEL_COUNTERS, _F_MODEL_RID)
