"""Spaces on the wire: gymnasium <-> ``SpaceSpec``, the ``SpaceValue`` codec, and ``MetaMap``.

* :func:`from_gymnasium` / :func:`to_gymnasium` convert space descriptions (§6.3).
* :func:`encode_batch` / :func:`decode_batch` move lists of per-lane values;
  :func:`encode` / :func:`decode` one value (a batch of one).
* :func:`encode_stacked` / :func:`decode_stacked` move leaves with a leading
  batch axis, for batched policies.
* :func:`check_batch` checks a batch's framing (leaf count, slab sizes, text
  headers) without decoding it.
* :func:`meta_from_python` / :func:`meta_to_python` convert infos and metadata.

Malformed payloads raise :class:`rlmesh_trio.ProtocolError` naming the leaf path.

The wire message types are re-exported for type hints (``SpaceSpec``,
``SpaceValue``, ``MetaMap``, ``MetaValue``), e.g. in transform hooks.
"""

from .._protocol import spaces_pb
from ._codec import (
    check_batch,
    decode,
    decode_batch,
    decode_stacked,
    encode,
    encode_batch,
    encode_stacked,
)
from ._meta import meta_from_python, meta_map_from_python, meta_to_python
from ._spec import from_gymnasium, to_gymnasium

SpaceSpec = spaces_pb.SpaceSpec
SpaceValue = spaces_pb.SpaceValue
MetaMap = spaces_pb.MetaMap
MetaValue = spaces_pb.MetaValue
DataType = spaces_pb.DataType

__all__ = [
    "DataType",
    "MetaMap",
    "MetaValue",
    "SpaceSpec",
    "SpaceValue",
    "check_batch",
    "decode",
    "decode_batch",
    "decode_stacked",
    "encode",
    "encode_batch",
    "encode_stacked",
    "from_gymnasium",
    "meta_from_python",
    "meta_map_from_python",
    "meta_to_python",
    "to_gymnasium",
]
