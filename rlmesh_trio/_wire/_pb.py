"""Protobuf wire primitives shared by every hand codec: varints, fields, keys, SpaceValue.

The hand codecs exist because betterproto2's reflective walk costs tens to
hundreds of microseconds per message. A shape a hand codec does not handle
raises :class:`Fallback` (decoders never ``assert``) and the caller hands it to
betterproto2, so a hand codec only has to be right for what it accepts. Field
keys come from the generated classes (:func:`key`), never typed by hand.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import betterproto2

from .._protocol import model_pb, spaces_pb
from . import _skim

__all__ = [
    "DECODE_ERRORS",
    "ENV_COUNTERS",
    "LEN",
    "MODEL_COUNTERS",
    "U64",
    "VARINT",
    "Fallback",
    "JoinCodec",
    "blob",
    "decode_context",
    "decode_space_value",
    "fields",
    "integer",
    "key",
    "number",
    "packed_varints",
    "put_len",
    "put_packed",
    "put_space_value",
    "put_text",
    "put_varint",
    "read_varint",
    "server_counts",
    "signed64",
    "text",
]

Q = TypeVar("Q", bound=betterproto2.Message)
R = TypeVar("R", bound=betterproto2.Message)

U64 = (1 << 64) - 1
VARINT = 0
LEN = 2


class Fallback(Exception):
    """Not a shape the hand codec handles: let betterproto2 do it."""


#: What a hand decoder can raise on bytes it does not handle (all mean: betterproto2's turn).
DECODE_ERRORS = (Fallback, IndexError, UnicodeDecodeError, struct.error)


# ---------------------------------------------------------------------- schema


@functools.cache
def number(message: type, name: str) -> int:
    """The field number of ``message.name``, read from betterproto2's field metadata.

    Raises:
        KeyError: the generated class has no such field.
    """
    for item in dataclasses.fields(message):  # type: ignore[arg-type]
        if item.name == name:
            return betterproto2.FieldMetadata.get(item).number
    raise KeyError(f"{message.__name__} has no field {name!r}")


@functools.cache
def key(message: type, name: str, wire: int = LEN) -> bytes:
    """The encoded key (field number and wire type) of ``message.name``."""
    out = bytearray()
    put_varint(out, number(message, name) << 3 | wire)
    return bytes(out)


# ---------------------------------------------------------------------- reading


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` (masked to 64 bits) and the position after it.

    Raises:
        Fallback: the varint is truncated or longer than ten bytes.
    """
    result = 0
    shift = 0
    try:
        while shift < 64:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result & U64, pos
            shift += 7
    except IndexError:
        raise Fallback from None
    raise Fallback


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """Every field of a message, in order: (number, wire type, int or bytes).

    Raises:
        Fallback: a fixed-width or group field, field number 0, or a length past the end.
        IndexError: truncated data (both are in :data:`DECODE_ERRORS`).
    """
    out: list[tuple[int, int, int | bytes]] = []
    append = out.append
    pos = 0
    end = len(data)
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = read_varint(data, pos)
        wire = tag & 7
        if tag < 8 or (wire != LEN and wire != VARINT):
            raise Fallback  # field number 0, or a fixed-width or group field
        value = data[pos]  # a varint's value or a length-delimited field's size
        if value < 0x80:
            pos += 1
        else:
            value, pos = read_varint(data, pos)
        if wire == VARINT:
            append((tag >> 3, VARINT, value))
            continue
        stop = pos + value
        if stop > end:
            raise Fallback
        append((tag >> 3, LEN, data[pos:stop]))
        pos = stop
    return out


def span(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The bounds of the length-delimited value whose size is at ``pos``.

    Raises:
        Fallback, IndexError: a malformed size or one past ``end``.
    """
    size = data[pos]
    if size < 0x80:
        pos += 1
    else:
        size, pos = read_varint(data, pos)
    stop = pos + size
    if stop > end:
        raise Fallback
    return pos, stop


def join_arm(data: bytes, arm_tag: int, id_tag: int) -> tuple[str | None, int, int] | None:
    """A ``JoinRequest`` of a request id and one arm as ``(request_id, start, stop)`` of the
    arm; ``None`` if anything else is in it (one-byte keys only). Raises: Fallback,
    IndexError, UnicodeDecodeError: malformed bytes."""
    request_id: str | None = None
    body: tuple[int, int] | None = None
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        start, pos = span(data, pos + 1, end)
        if tag == arm_tag and body is None:
            body = (start, pos)
        elif tag == id_tag and request_id is None:
            request_id = data[start:pos].decode()
        else:
            return None
    if body is None:
        return None
    return request_id, body[0], body[1]


def packed_varints(data: bytes) -> list[int]:
    """The values of a packed repeated varint field."""
    out = []
    pos = 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        out.append(value)
    return out


def signed64(value: int) -> int:
    """A 64-bit varint read as ``int64`` (two's complement)."""
    return value - (1 << 64) if value >= (1 << 63) else value


def blob(value: int | bytes) -> bytes:
    """A length-delimited field's bytes (a Fallback for a varint where a message belongs)."""
    if not isinstance(value, bytes):
        raise Fallback
    return value


def integer(value: int | bytes) -> int:
    """A varint field's value (a Fallback for a length-delimited field)."""
    if not isinstance(value, int):
        raise Fallback
    return value


def text(value: int | bytes) -> str:
    """A string field's value (a Fallback for a varint; UnicodeDecodeError if not UTF-8)."""
    return blob(value).decode()


def decode_space_value(data: bytes) -> spaces_pb.SpaceValue:
    """A ``SpaceValue`` (only ``leaves``, repeated bytes).

    Raises:
        Fallback, IndexError: any other field, or a malformed one (:data:`DECODE_ERRORS`).
    """
    leaves: list[bytes] = []
    pos, end = 0, len(data)
    tag = _LEAVES_KEY
    while pos < end:
        if data[pos] != tag:
            raise Fallback
        size = data[pos + 1]
        if size < 0x80:
            pos += 2
        else:
            size, pos = read_varint(data, pos + 1)
        stop = pos + size
        if stop > end:
            raise Fallback
        leaves.append(data[pos:stop])
        pos = stop
    return spaces_pb.SpaceValue(leaves=leaves)


# ---------------------------------------------------------------------- writing


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a varint (negative ``int64`` as ten bytes, like protobuf)."""
    if 0 <= value < 0x80:
        out.append(value)
        return
    value &= U64
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def put_len(out: bytearray, tag: bytes | int, payload: bytes | bytearray) -> None:
    """Append a length-delimited field with key ``tag``."""
    # The key and the common one-byte length are written inline: this runs
    # several times per served message.
    if isinstance(tag, int):
        out.append(tag)
    else:
        out += tag
    size = len(payload)
    if size < 0x80:
        out.append(size)
    else:
        put_varint(out, size)
    out += payload


def put_text(out: bytearray, tag: bytes, value: str) -> None:
    """Append a string field, unless it is empty (proto3 writes no default)."""
    if value:
        put_len(out, tag, value.encode())


def put_packed(out: bytearray, tag: bytes | int, values: list[int]) -> None:
    """Append a packed repeated varint field."""
    body = bytearray()
    for value in values:
        put_varint(body, value)
    put_len(out, tag, body)


def put_space_value(out: bytearray, tag: bytes, value: spaces_pb.SpaceValue) -> None:
    """Append a ``SpaceValue`` sub-message field (its known field, ``leaves``)."""
    leaves = value.leaves
    if len(leaves) == 1 and len(leaves[0]) < 0x7E:
        # The usual value on a step's path: one leaf, both sizes one byte, no body copy.
        out += tag
        out += bytes((len(leaves[0]) + 2, _LEAVES_KEY, len(leaves[0])))
        out += leaves[0]
        return
    body = bytearray()
    for leaf in value.leaves:
        put_len(body, _LEAVES_KEY, leaf)
    put_len(out, tag, body)


_LEAVES_KEY = key(spaces_pb.SpaceValue, "leaves")[0]


# ---------------------------------------------------------------------- Join messages

#: The additive uint64 counters of 0.1.0 Join responses besides ``endpoint_total_ns``.
ENV_COUNTERS = ("decode_ns", "user_ns", "encode_ns", "lane_skew_ns", "queue_ns")
MODEL_COUNTERS = (
    "decode_ns",
    "user_ns",
    "encode_ns",
    "adapter_ns",
    "in_flight",
    "held_episodes",
    "held_bytes",
)

_CONTEXT = model_pb.AdapterContext
_CONTEXT_FIELDS = {
    number(_CONTEXT, name): index
    for index, name in enumerate(("session_id", "env_id", "request_id"))
}


def decode_context(data: bytes) -> model_pb.AdapterContext:
    """An ``AdapterContext`` (three strings), walked inline: one rides on every predict.

    Raises:
        Fallback, IndexError, UnicodeDecodeError: see :data:`DECODE_ERRORS`.
    """
    texts = ["", "", ""]
    pos, end = 0, len(data)
    while pos < end:
        index = _CONTEXT_FIELDS.get(data[pos] >> 3)
        if index is None or data[pos] & 7 != LEN:
            raise Fallback  # includes multi-byte keys: no such field in the schema
        size = data[pos + 1]
        pos += 2
        if size >= 0x80:
            size, pos = read_varint(data, pos - 1)
        stop = pos + size
        if stop > end:
            raise Fallback
        texts[index] = data[pos:stop].decode()
        pos = stop
    return _CONTEXT(session_id=texts[0], env_id=texts[1], request_id=texts[2])


#: How often the servers' hand codecs ran and fell back (a test proves the fast path runs).
server_counts: dict[str, int] = {"decode": 0, "encode": 0, "fallback": 0}


class JoinCodec(Generic[Q, R]):
    """A server's Join codec: ``request`` messages read and ``response`` messages written
    by hand when their ``kind`` arm has a hand decoder or encoder, betterproto2 for
    every other shape (and wherever the hand code raises :class:`Fallback`).

    A hand-read request holds one arm and at most a ``request_id``. A hand-written
    response is its arm, then ``request_id``, ``endpoint_total_ns`` and the non-zero
    additive uint64 ``counters``, in betterproto2's order (field numbers), so the
    bytes equal ``bytes(response)``.
    """

    def __init__(
        self,
        request: type[Q],
        decoders: Mapping[str, Callable[[bytes], Any]],
        response: type[R],
        encoders: Mapping[str, Callable[[Any], bytes | bytearray]],
        counters: Iterable[str],
    ) -> None:
        self._request = request
        self._response = response
        self._arms: dict[int, tuple[str, Callable[[bytes], Any] | None]] = {
            number(request, "request_id"): ("request_id", None)
        }
        self._arms.update((number(request, name), (name, fn)) for name, fn in decoders.items())
        self._encoders = {name: (key(response, name), fn) for name, fn in encoders.items()}
        self._request_id = key(response, "request_id")
        self._total_ns = key(response, "endpoint_total_ns", VARINT)
        self._counters = tuple((key(response, name, VARINT), name) for name in counters)
        self._counter_names = tuple(name for _, name in self._counters)

    def decode(self, data: bytes) -> Q:
        """Parse a request.

        Raises:
            Exception: whatever betterproto2 raises for bytes it cannot parse.
        """
        try:
            found: dict[str, Any] = {}
            for field, _wire, value in fields(data):
                entry = self._arms.get(field)
                if entry is None or entry[0] in found:
                    raise Fallback
                name, decode = entry
                found[name] = text(value) if decode is None else decode(blob(value))
            if len(found) - ("request_id" in found) == 1:
                server_counts["decode"] += 1
                build: Any = self._request
                return build(**found)  # type: ignore[no-any-return]
        except DECODE_ERRORS:
            pass
        server_counts["fallback"] += 1
        return _skim.parse(self._request, data)

    def decode_arm(self, data: bytes) -> tuple[str, str, Any] | None:
        """A request as its parts, ``(request_id, kind, body)``, without building the
        request itself (what :meth:`decode` would have put in it); ``None`` where
        :meth:`decode` would fall back to betterproto2."""
        request_id: str | None = None
        kind: str | None = None
        body: Any = None
        try:
            for field, _wire, value in fields(data):
                entry = self._arms.get(field)
                if entry is None:
                    return None
                name, decode = entry
                if decode is None and request_id is None:
                    request_id = text(value)
                elif decode is not None and kind is None:
                    kind, body = name, decode(blob(value))
                else:
                    return None
        except DECODE_ERRORS:
            return None
        if kind is None:
            return None
        server_counts["decode"] += 1
        return request_id or "", kind, body

    def encode(self, response: R) -> bytes:
        """Serialise a response."""
        kind, body = betterproto2.which_one_of(response, "kind")
        out = self._arm(kind, body)
        if out is None:
            return bytes(response)
        tail: Any = response  # the Join responses' shared fields, not on betterproto2.Message
        self._ids(out, tail.request_id, tail.endpoint_total_ns)
        for tag, name in self._counters:
            value = getattr(response, name)
            if value:
                out += tag
                put_varint(out, value)
        return bytes(out)

    def encode_parts(
        self,
        kind: str,
        body: Any,
        request_id: str,
        endpoint_total_ns: int | None,
        counters: Iterable[int],
    ) -> bytes:
        """Serialise the response with arm ``kind`` set to ``body`` and these fields
        (``counters``: the additive counters' values, in the order given at
        construction), without building it: the bytes :meth:`encode` gives for it."""
        out = self._arm(kind, body)
        if out is None:
            values = dict(zip(self._counter_names, counters, strict=True))
            build: Any = self._response
            response = build(
                **{kind: body}, request_id=request_id, endpoint_total_ns=endpoint_total_ns, **values
            )
            return bytes(response)
        self._ids(out, request_id, endpoint_total_ns)
        for (tag, _), value in zip(self._counters, counters, strict=True):
            if value:
                out += tag
                put_varint(out, value)
        return bytes(out)

    def _arm(self, kind: str, body: Any) -> bytearray | None:
        """The response's arm, written by hand; ``None`` for betterproto2's turn."""
        arm = self._encoders.get(kind)
        out = bytearray()
        try:
            if arm is None:
                raise Fallback
            put_len(out, arm[0], arm[1](body))
        except Fallback:
            server_counts["fallback"] += 1
            return None
        server_counts["encode"] += 1
        return out

    def _ids(self, out: bytearray, request_id: str, endpoint_total_ns: int | None) -> None:
        put_text(out, self._request_id, request_id)
        if endpoint_total_ns is not None:
            out += self._total_ns
            put_varint(out, endpoint_total_ns)
