"""A linear walk over a protobuf message before betterproto2 parses it: bounded work.

betterproto2's parse appends every unknown field to one ``bytes`` (quadratic: a
1 MiB message of zeros, field 0 over and over, takes about 100 s) and spends
microseconds per field in Python. Every message betterproto2 reads from a peer
(the servers' requests outside the hand codecs' shapes, the client's replies)
is walked here first, at a fraction of that cost per field, and refused when it
is not well-formed protobuf (field number 0, a group or reserved wire type, a
truncated varint, nesting past :data:`MAX_DEPTH`) or when it would cost
betterproto2 too much: more than :data:`MAX_UNKNOWN_FIELDS` unknown fields or
:data:`MAX_UNKNOWN_BYTES` of them (what peers of a newer edition add is a few
small fields), or more than :data:`MAX_FIELDS` fields in all.

The schema comes from the generated classes' public metadata
(``dataclasses.fields``, ``betterproto2.FieldMetadata``, type hints).
"""

from __future__ import annotations

import dataclasses
import threading
import types
import typing
from typing import Any

import betterproto2

from ._grpc import FramingError

__all__ = ["MAX_DEPTH", "MAX_FIELDS", "MAX_UNKNOWN_BYTES", "MAX_UNKNOWN_FIELDS", "parse", "skim"]

MAX_FIELDS = 1 << 18
MAX_UNKNOWN_FIELDS = 1024
MAX_UNKNOWN_BYTES = 256 * 1024
#: protobuf's own default recursion limit.
MAX_DEPTH = 100

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_FIXED64 = {betterproto2.TYPE_DOUBLE, betterproto2.TYPE_FIXED64, betterproto2.TYPE_SFIXED64}
_FIXED32 = {betterproto2.TYPE_FLOAT, betterproto2.TYPE_FIXED32, betterproto2.TYPE_SFIXED32}
_DELIMITED = {
    betterproto2.TYPE_STRING,
    betterproto2.TYPE_BYTES,
    betterproto2.TYPE_MESSAGE,
    betterproto2.TYPE_MAP,
}

#: A message's known fields: number -> (wire type, schema of its messages or ``None``).
Schema = dict[int, tuple[int, "Schema | None"]]


def _wire_type(proto_type: str) -> int:
    if proto_type in _DELIMITED:
        return _LEN
    if proto_type in _FIXED64:
        return _I64
    return _I32 if proto_type in _FIXED32 else _VARINT


def _message_class(hint: Any) -> type | None:
    """The betterproto2 message class in ``X | None``, ``list[X]`` or ``dict[K, X]``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType, list, dict):
        for arg in reversed(args):
            found = _message_class(arg)
            if found is not None:
                return found
        return None
    if isinstance(hint, type) and issubclass(hint, betterproto2.Message):
        return hint
    return None


_SCHEMAS: dict[type, Schema] = {}
_BUILDING = threading.Lock()


def _schema(message_type: type, building: dict[type, Schema]) -> Schema:
    schema = building.get(message_type)
    if schema is not None:
        return schema
    # Kept before it is filled in, so a recursive message type refers to itself.
    schema = building[message_type] = {}
    try:
        hints = typing.get_type_hints(message_type)
    except Exception:  # an unresolvable annotation: its fields' messages go unwalked
        hints = {}
    for item in dataclasses.fields(message_type):
        meta = betterproto2.FieldMetadata.get(item)
        child: Schema | None = None
        nested = _message_class(hints.get(item.name))
        if meta.proto_type == betterproto2.TYPE_MAP:
            value_meta = meta.map_meta[1] if meta.map_meta else None
            walked = value_meta is not None and value_meta.proto_type == betterproto2.TYPE_MESSAGE
            child = {
                1: (_LEN, None),
                2: (_LEN, _schema(nested, building) if walked and nested else None),
            }
            if value_meta is not None and not walked:
                child[2] = (_wire_type(value_meta.proto_type), None)
            key_meta = meta.map_meta[0] if meta.map_meta else None
            if key_meta is not None:
                child[1] = (_wire_type(key_meta.proto_type), None)
        elif meta.proto_type == betterproto2.TYPE_MESSAGE and nested is not None:
            child = _schema(nested, building)
        schema[meta.number] = (_wire_type(meta.proto_type), child)
    return schema


class _Count:
    __slots__ = ("fields", "unknown", "unknown_bytes")

    def __init__(self) -> None:
        self.fields = 0
        self.unknown = 0
        self.unknown_bytes = 0


def skim(data: bytes | bytearray | memoryview, message_type: type) -> None:
    """Walk ``data`` as a ``message_type`` (a betterproto2 message class).

    Raises:
        FramingError: not well-formed protobuf, or over one of the bounds above
            (its text names which).
    """
    schema = _SCHEMAS.get(message_type)
    if schema is None:
        # Servers decode big messages on worker threads: one builds, none sees a half-built one.
        with _BUILDING:
            building: dict[type, Schema] = dict(_SCHEMAS)
            schema = _schema(message_type, building)
            _SCHEMAS.update(building)
    _walk(memoryview(data), 0, len(data), schema, 0, _Count())


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise FramingError("a protobuf varint that is truncated or over ten bytes")


def _walk(data: memoryview, pos: int, end: int, schema: Schema, depth: int, count: _Count) -> None:
    if depth > MAX_DEPTH:
        raise FramingError(f"a protobuf message nested over {MAX_DEPTH} levels deep")
    while pos < end:
        start = pos
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise FramingError("a protobuf field number 0")
        if wire == _VARINT:
            _, pos = _varint(data, pos, end)
        elif wire == _LEN:
            size, pos = _varint(data, pos, end)
            # Past the end: betterproto2 reads what is there, and so does the walk.
            stop = min(pos + size, end)
            known = schema.get(number)
            if known is not None and known[0] == _LEN and known[1] is not None:
                _walk(data, pos, stop, known[1], depth + 1, count)
            pos = stop
        elif wire == _I64 or wire == _I32:
            pos = min(pos + (8 if wire == _I64 else 4), end)
        else:
            raise FramingError(f"a protobuf field of wire type {wire} (groups are not proto3)")
        count.fields += 1
        if count.fields > MAX_FIELDS:
            raise FramingError(f"a protobuf message of over {MAX_FIELDS} fields")
        known = schema.get(number)
        if known is None or (known[0] != wire and not (wire == _LEN and known[0] != _LEN)):
            _unknown(count, pos - start)


def _unknown(count: _Count, size: int) -> None:
    count.unknown += 1
    count.unknown_bytes += size
    if count.unknown > MAX_UNKNOWN_FIELDS:
        raise FramingError(f"a protobuf message of over {MAX_UNKNOWN_FIELDS} unknown fields")
    if count.unknown_bytes > MAX_UNKNOWN_BYTES:
        raise FramingError(
            f"a protobuf message of over {MAX_UNKNOWN_BYTES} bytes of unknown fields"
        )


M = typing.TypeVar("M", bound=betterproto2.Message)


def parse(message_type: type[M], data: bytes) -> M:
    """``message_type.parse(data)`` after :func:`skim`: what every peer's bytes go through
    on their way to betterproto2.

    Raises:
        FramingError: see :func:`skim`.
        Exception: whatever betterproto2 raises for bytes it cannot parse.
    """
    skim(data, message_type)
    return message_type.parse(data)
