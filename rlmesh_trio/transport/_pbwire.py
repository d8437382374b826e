"""Protobuf wire primitives for the hand-rolled hot-path codecs (varints, fields, SpaceValue).

The fast codecs (``_model_fastwire``, ``_env_fastwire``) parse and build the
few Join messages on a step's path directly, because betterproto2's
reflective walk costs tens to hundreds of microseconds per message. They
share these primitives. Anything a fast codec does not handle raises
:class:`Fallback`, and the caller hands the message to betterproto2, so a
fast codec only has to be right for what it accepts.

Only the varint (0) and length-delimited (2) wire types occur on the hot
shapes; any other wire type is a :class:`Fallback`. Every tag written here
is one byte (field numbers below 16).
"""

from __future__ import annotations

from .._wire import spaces_pb

__all__ = [
    "U64",
    "Fallback",
    "blob",
    "decode_space_value",
    "fields",
    "packed_varints",
    "put_len",
    "put_space_value",
    "put_varint",
    "read_varint",
    "signed64",
    "text",
]

U64 = (1 << 64) - 1

#: One field: (number, wire type, value), value an int (varint) or the bytes of a LEN field.
Field = tuple[int, int, "int | bytes"]


class Fallback(Exception):
    """Not a shape the fast codec handles: let betterproto2 do it."""


# ---------------------------------------------------------------------- reading


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` (masked to 64 bits) and the position after it."""
    if pos < len(data) and data[pos] < 0x80:
        return data[pos], pos + 1
    result = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise Fallback
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & U64, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """Every field of a message, in order: (number, wire type, int or bytes)."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise Fallback
        if wire == 0:
            value, pos = read_varint(data, pos)
            out.append((number, 0, value))
        elif wire == 2:
            size, pos = read_varint(data, pos)
            if pos + size > end:
                raise Fallback
            out.append((number, 2, data[pos : pos + size]))
            pos += size
        else:
            raise Fallback
    return out


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


def text(value: int | bytes) -> str:
    """A string field's value (a Fallback if it is not valid UTF-8 bytes)."""
    if not isinstance(value, bytes):
        raise Fallback
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise Fallback from None


def decode_space_value(data: bytes) -> spaces_pb.SpaceValue:
    """A ``SpaceValue`` (only ``leaves = 1``, repeated bytes)."""
    leaves: list[bytes] = []
    for number, _wire, value in fields(data):
        if number != 1 or not isinstance(value, bytes):
            raise Fallback
        leaves.append(value)
    return spaces_pb.SpaceValue(leaves=leaves)


# ---------------------------------------------------------------------- writing


def put_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a varint (negative ``int64`` as ten bytes, like protobuf)."""
    value &= U64
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def put_len(out: bytearray, tag: int, payload: bytes | bytearray) -> None:
    """Append a length-delimited field; ``tag`` is its one-byte key."""
    out.append(tag)
    put_varint(out, len(payload))
    out += payload


def put_space_value(out: bytearray, tag: int, value: spaces_pb.SpaceValue) -> None:
    """Append a ``SpaceValue`` sub-message field (a Fallback if it carries unknown fields)."""
    if value._unknown_fields:
        raise Fallback
    body = bytearray()
    for leaf in value.leaves:
        put_len(body, 0x0A, leaf)
    put_len(out, tag, body)
