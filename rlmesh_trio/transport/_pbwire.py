"""Moved to :mod:`rlmesh_trio.wire._pb`; this name stays importable for the servers."""

from ..wire._pb import (
    U64,
    Fallback,
    blob,
    decode_space_value,
    fields,
    packed_varints,
    put_len,
    put_space_value,
    put_varint,
    read_varint,
    signed64,
    text,
)

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
