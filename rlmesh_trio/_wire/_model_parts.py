"""A model server's one-row predict read from, and answered in, its protobuf parts.

Every route's step is one ``JoinRequest`` holding one ``PredictRequest`` (a
context, one observation, one episode). Read through the message classes it
builds five betterproto2 messages and its reply three more, and a oneof lookup
runs on each side. :func:`read_predict` keeps what the reply needs instead: the
request id, the ``env_id``, the observation and the context's own bytes, which
the reply echoes as they came. That is byte for byte what re-encoding the parsed
context gives, because only a context in canonical form (each field once, in
field order, non-empty, one-byte sizes) is read this way; any other request,
or one the host would refuse, is left to the general path
(``tests/wire/test_model_reply_parts.py`` checks both ways).
"""

from __future__ import annotations

from .._protocol import model_pb, spaces_pb
from ._pb import (
    DECODE_ERRORS,
    LEN,
    MODEL_COUNTERS,
    VARINT,
    decode_space_value,
    join_arm,
    key,
    number,
    put_len,
    put_space_value,
    put_text,
    put_varint,
    read_varint,
    span,
)
from ._tail import put_timing_tail

__all__ = ["PredictParts", "encode_predict_reply", "read_predict"]

# The one-byte keys (field number and LEN) of the fields a one-row predict holds.
_T_PREDICT = key(model_pb.JoinRequest, "predict")[0]
_T_REQUEST_ID = key(model_pb.JoinRequest, "request_id")[0]
_T_CONTEXT, _T_OBSERVATION, _T_INFO = (
    key(model_pb.PredictRequest, name)[0] for name in ("context", "observation", "episode_info")
)
_T_EPISODE = key(model_pb.EpisodeInfo, "episode_id")[0]
_T_SEED = key(model_pb.EpisodeInfo, "seed", VARINT)[0]
# The context's fields in the order betterproto2 writes them (its declaration order).
_C_SESSION, _C_ENV, _C_REQUEST = (
    number(model_pb.AdapterContext, name) for name in ("session_id", "env_id", "request_id")
)
assert _C_SESSION < _C_ENV < _C_REQUEST < 16  # one-byte keys, ascending: see _env_id

_K_PREDICT = key(model_pb.JoinResponse, "predict")
_K_REQUEST_ID = key(model_pb.JoinResponse, "request_id")
_K_TOTAL_NS = key(model_pb.JoinResponse, "endpoint_total_ns", VARINT)
_K_PHASES = tuple(key(model_pb.JoinResponse, name, VARINT) for name in MODEL_COUNTERS[:3])
assert MODEL_COUNTERS[:3] == ("decode_ns", "user_ns", "encode_ns")
_K_PR_CONTEXT = key(model_pb.PredictResponse, "context")
_K_PR_ACTIONS = key(model_pb.PredictResponse, "actions")


class PredictParts:
    """What a one-row predict's reply needs: ``context`` is the request's
    ``AdapterContext`` as it was encoded, ``env_id`` its adapter's key."""

    __slots__ = ("context", "env_id", "observation", "request_id")

    def __init__(
        self, request_id: str, context: bytes, env_id: str, observation: spaces_pb.SpaceValue
    ) -> None:
        self.request_id = request_id
        self.context = context
        self.env_id = env_id
        self.observation = observation


def read_predict(data: bytes) -> PredictParts | None:
    """The parts of a ``JoinRequest`` that is a one-row predict the host would take
    (context ids set, one non-empty ``episode_id``, an observation); ``None`` for
    anything else, valid or not: the general path reads that."""
    try:
        return _read(data)
    except DECODE_ERRORS:
        return None


def _read(data: bytes) -> PredictParts | None:
    """:func:`read_predict`, walking the bytes in place (one-byte keys only: the fields
    read here all have them; any other key is some other request)."""
    arm = join_arm(data, _T_PREDICT, _T_REQUEST_ID)
    if arm is None:
        return None
    request_id, pos, end = arm
    context = observation = None
    episodes = 0
    while pos < end:
        tag = data[pos]
        start, pos = span(data, pos + 1, end)
        if tag == _T_CONTEXT and context is None:
            context = data[start:pos]
        elif tag == _T_OBSERVATION and observation is None:
            observation = data[start:pos]
        elif tag == _T_INFO and not episodes and _one_episode(data, start, pos):
            episodes = 1
        else:
            return None  # a second episode_info among them: a batch, not one row
    if context is None or observation is None or not episodes:
        return None
    env_id = _env_id(context)
    if env_id is None:
        return None
    return PredictParts(request_id or "", context, env_id, decode_space_value(observation))


def _one_episode(data: bytes, pos: int, end: int) -> bool:
    """Whether the ``EpisodeInfo`` in ``data[pos:end]`` reads as the hand decoder reads
    it, with an id.

    Raises:
        Fallback, IndexError, UnicodeDecodeError: see :data:`DECODE_ERRORS`.
    """
    episode_id: str | None = None
    seeded = False
    while pos < end:
        tag = data[pos]
        if tag == _T_SEED and not seeded:
            seeded = True
            _, pos = read_varint(data, pos + 1)
            continue
        start, pos = span(data, pos + 1, end)
        if tag != _T_EPISODE or episode_id is not None:
            return False
        episode_id = data[start:pos].decode()
    return pos == end and bool(episode_id)


def _env_id(data: bytes) -> str | None:
    """A canonical ``AdapterContext``'s ``env_id`` when it and ``request_id`` are set.

    Raises:
        UnicodeDecodeError: a field is not UTF-8 (see :data:`DECODE_ERRORS`).
    """
    found = {_C_SESSION: "", _C_ENV: "", _C_REQUEST: ""}
    last = 0
    pos, end = 0, len(data)
    while pos + 1 < end:
        tag = data[pos]
        field = tag >> 3
        size = data[pos + 1]
        stop = pos + 2 + size
        if tag & 7 != LEN or field <= last or field not in found or not 0 < size < 0x80:
            return None
        if stop > end:
            return None
        found[field] = data[pos + 2 : stop].decode()
        last = field
        pos = stop
    if pos != end or not found[_C_ENV] or not found[_C_REQUEST]:
        return None
    return found[_C_ENV]


def encode_predict_reply(
    parts: PredictParts,
    frame: spaces_pb.SpaceValue,
    endpoint_total_ns: int,
    phases: tuple[int, int, int],
) -> bytes:
    """The bytes of ``JoinResponse(predict=PredictResponse(context, actions=[frame]),
    request_id, endpoint_total_ns, decode_ns, user_ns, encode_ns)`` (``phases``: the
    last three) as the server's codec writes them, the context as it came."""
    context = parts.context
    leaves = frame.leaves
    request_id = parts.request_id.encode()
    if len(leaves) != 1 or len(leaves[0]) + len(context) > _MAX_SHORT or len(request_id) > 0x7F:
        return _encode_long(parts, frame, endpoint_total_ns, phases)
    # The usual reply: every size fits one byte, so it is written in one expression.
    leaf = leaves[0]
    size = len(leaf)
    body = len(context) + size + 6  # two keys and sizes, the leaf's key and size
    out = (
        _K_PREDICT
        + bytes((body,))
        + _K_PR_CONTEXT
        + bytes((len(context),))
        + context
        + _K_PR_ACTIONS
        + bytes((size + 2, _LEAF, size))
        + leaf
    )
    if request_id:
        out += _K_REQUEST_ID + bytes((len(request_id),)) + request_id
    out += _K_TOTAL_NS + _varint(endpoint_total_ns)
    decode_ns, user_ns, encode_ns = phases
    if decode_ns:
        out += _K_DECODE + _varint(decode_ns)
    if user_ns:
        out += _K_USER + _varint(user_ns)
    if encode_ns:
        out += _K_ENCODE + _varint(encode_ns)
    return out


#: The most context and leaf bytes together whose predict body still has one-byte sizes.
_MAX_SHORT = 0x7F - 6
_LEAF = key(spaces_pb.SpaceValue, "leaves")[0]
_K_DECODE, _K_USER, _K_ENCODE = _K_PHASES


def _varint(value: int) -> bytes:
    """``value`` (a non-negative count of nanoseconds) as a varint."""
    if value < 0x80:
        return bytes((value,))
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x200000:
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    out = bytearray()
    put_varint(out, value)
    return bytes(out)


def _encode_long(
    parts: PredictParts,
    frame: spaces_pb.SpaceValue,
    endpoint_total_ns: int,
    phases: tuple[int, int, int],
) -> bytes:
    """:func:`encode_predict_reply` for any sizes."""
    body = bytearray()
    put_len(body, _K_PR_CONTEXT, parts.context)
    put_space_value(body, _K_PR_ACTIONS, frame)
    out = bytearray()
    put_len(out, _K_PREDICT, body)
    put_text(out, _K_REQUEST_ID, parts.request_id)
    put_timing_tail(out, _K_TOTAL_NS, endpoint_total_ns, _K_PHASES, phases)
    return bytes(out)
