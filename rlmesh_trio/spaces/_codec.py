"""The ``SpaceValue`` codec calls: batch slabs over N lanes, in per-lane and stacked forms (§6).

A spec is compiled once into a tree of small node objects (cached by the spec
object's identity), so a call does no spec inspection. Fixed-stride leaves
(Box, Discrete, MultiBinary, MultiDiscrete) move whole slabs through numpy
(``frombuffer`` on decode, ``tobytes`` on encode) with no per-element Python
work; only Text, Dict and Tuple loop over lanes, because their per-lane values
are Python objects.

Decoded arrays are fresh, writable copies by default (one memcpy per slab):
envs, hooks and policies may write into what they receive, and a read-only view
of the protobuf's ``bytes`` would surprise them. ``copy=False`` skips that copy
for callers that only read (the allocation, not the memcpy, dominates large
slabs on small VMs: fresh pages fault in).

The pieces live in small modules beside this one: ``_values`` (casts, range
and shape checks), ``_node`` (the node interface), ``_fixed`` (fixed-stride
leaves), ``_text`` (Text), ``_tree`` (Dict and Tuple) and ``_compile`` (spec
-> node tree, cached). This module holds only the public calls.

Every malformed input, either direction, raises
:class:`~rlmesh_trio.ProtocolError` naming the leaf path and what was expected.
Every call is synchronous CPU work with no checkpoint: there is nothing to cancel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import ProtocolError
from .._protocol import spaces_pb
from ._compile import Codec, compile_spec
from ._node import Node

__all__ = [
    "Node",
    "check_batch",
    "compile_spec",
    "decode",
    "decode_batch",
    "decode_stacked",
    "encode",
    "encode_batch",
    "encode_stacked",
]


def _leaves(codec: Codec, value: spaces_pb.SpaceValue, n: int) -> list[bytes]:
    if not isinstance(value, spaces_pb.SpaceValue):
        raise ProtocolError(f"expected a SpaceValue, got {type(value).__name__}", path="$")
    if not isinstance(n, int) or n < 0:
        raise ProtocolError(f"lane count must be a non-negative int, got {n!r}", path="$")
    leaves = value.leaves
    if len(leaves) != codec.n_leaves:
        raise ProtocolError(
            f"leaf count mismatch: got {len(leaves)} leaves, expected {codec.n_leaves}", path="$"
        )
    return leaves


def encode_batch(spec: spaces_pb.SpaceSpec, values: Sequence[Any]) -> spaces_pb.SpaceValue:
    """Encode ``len(values)`` per-lane values into one lane-major ``SpaceValue``.

    Raises:
        ProtocolError: a value that does not fit the spec, naming the leaf path.
    """
    codec = compile_spec(spec)
    if (
        isinstance(values, Mapping | str | bytes)
        or not isinstance(values, Sequence | np.ndarray)
        or (isinstance(values, np.ndarray) and values.ndim == 0)
    ):
        raise ProtocolError(
            f"expected a list of per-lane values, got {type(values).__name__}", path="$"
        )
    out: list[bytes] = []
    codec.root.encode_lanes(values, len(values), out)
    return spaces_pb.SpaceValue(leaves=out)


def decode_batch(
    spec: spaces_pb.SpaceSpec, value: spaces_pb.SpaceValue, n: int, *, copy: bool = True
) -> list[Any]:
    """Decode an ``n``-lane ``SpaceValue`` into a list of ``n`` per-lane values.

    Box -> ``np.ndarray``; Discrete -> ``int``; MultiBinary -> ``int8`` array;
    MultiDiscrete -> ``int64`` array; Text -> ``str``; Dict -> ``dict`` (in the
    gymnasium key order when the spec came from :func:`from_gymnasium`, else wire
    order); Tuple -> ``tuple``.

    With ``copy=False``, Box and MultiDiscrete arrays are read-only views of the
    message's bytes (no copy, no allocation); by default they are writable copies.

    Raises:
        ProtocolError: a malformed payload or out-of-range value, naming the leaf path.
    """
    codec = compile_spec(spec)
    return codec.root.decode_lanes(_leaves(codec, value, n), n, copy)


def encode(spec: spaces_pb.SpaceSpec, value: Any) -> spaces_pb.SpaceValue:
    """Encode one value as a one-lane batch (the only form the wire has).

    Raises:
        ProtocolError: a value that does not fit the spec, naming the leaf path.
    """
    codec = compile_spec(spec)
    out: list[bytes] = []
    codec.root.encode_lanes([value], 1, out)
    return spaces_pb.SpaceValue(leaves=out)


def decode(spec: spaces_pb.SpaceSpec, value: spaces_pb.SpaceValue, *, copy: bool = True) -> Any:
    """Decode a one-lane ``SpaceValue`` into one value (see :func:`decode_batch`).

    Raises:
        ProtocolError: a malformed payload or out-of-range value, naming the leaf path.
    """
    codec = compile_spec(spec)
    return codec.root.decode_lanes(_leaves(codec, value, 1), 1, copy)[0]


def encode_stacked(spec: spaces_pb.SpaceSpec, stacked: Any, n: int) -> spaces_pb.SpaceValue:
    """Encode leaves that carry a leading batch axis of length ``n``.

    Box/MultiBinary/MultiDiscrete -> array ``(n, *shape)``; Discrete -> ``(n,)``;
    Text -> ``list[str]``; Dict -> dict of stacked; Tuple -> tuple of stacked.

    Raises:
        ProtocolError: a value that does not fit the spec or a bad ``n``, naming the leaf path.
    """
    codec = compile_spec(spec)
    if not isinstance(n, int) or n < 0:
        raise ProtocolError(f"lane count must be a non-negative int, got {n!r}", path="$")
    out: list[bytes] = []
    codec.root.encode_stacked(stacked, n, out)
    return spaces_pb.SpaceValue(leaves=out)


def check_batch(spec: spaces_pb.SpaceSpec, value: spaces_pb.SpaceValue, n: int) -> None:
    """Check an ``n``-lane ``SpaceValue``'s framing against ``spec`` without decoding values.

    Leaf count, the exact byte size of every fixed-stride slab, and each text
    slab's header, lengths and UTF-8. Value ranges are left to the decoder.
    Cheap enough for every step (no arrays are built).

    Raises:
        ProtocolError: a framing error, naming the leaf path.
    """
    codec = compile_spec(spec)
    leaves = _leaves(codec, value, n)
    for index, stride, path in codec.fixed:
        size = len(leaves[index])
        if size != n * stride:
            raise ProtocolError(
                f"length mismatch: slab: got {size} bytes, expected {n} lanes * {stride}",
                path=path,
            )
    for text in codec.texts:
        text.decode_lanes(leaves, n, False)


def decode_stacked(
    spec: spaces_pb.SpaceSpec, value: spaces_pb.SpaceValue, n: int, *, copy: bool = True
) -> Any:
    """Decode an ``n``-lane ``SpaceValue`` into leaves with a leading batch axis.

    The inverse of :func:`encode_stacked`: Box/MultiBinary/MultiDiscrete arrays of
    shape ``(n, *shape)``, Discrete ``int64`` arrays of shape ``(n,)``, Text
    ``list[str]``, Dict a dict of stacked children, Tuple a tuple of them.
    ``copy=False`` returns read-only views where possible (see :func:`decode_batch`).

    Raises:
        ProtocolError: a malformed payload or out-of-range value, naming the leaf path.
    """
    codec = compile_spec(spec)
    return codec.root.decode_stacked(_leaves(codec, value, n), n, copy)
