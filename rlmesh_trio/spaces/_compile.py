"""Compile a ``SpaceSpec`` once into a tree of codec nodes, cached by the spec's identity."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._errors import ProtocolError
from .._protocol import spaces_pb
from ._cache import IdentityCache
from ._dtypes import INT_KINDS, numpy_of_dtype
from ._fixed import BoxLeaf, DiscreteLeaf, FixedLeaf, MultiBinaryLeaf, MultiDiscreteLeaf
from ._node import Node
from ._spec import KEY_ORDER, box_bounds, check_shape, child_path, spec_kind
from ._text import TextLeaf
from ._tree import DictNode, TupleNode
from ._values import U8

__all__ = ["Codec", "compile_spec"]


class Codec:
    """A compiled spec: the root node and how many leaves a value carries."""

    __slots__ = ("fixed", "n_leaves", "root", "texts")

    def __init__(self, root: Node, n_leaves: int) -> None:
        self.root = root
        self.n_leaves = n_leaves
        leaves = _leaf_nodes(root)
        # For check_batch: (leaf index, bytes per lane, path) of every fixed-stride leaf.
        self.fixed = tuple((f.index, f.stride, f.path) for f in leaves if isinstance(f, FixedLeaf))
        self.texts = tuple(t for t in leaves if isinstance(t, TextLeaf))


def _leaf_nodes(node: Node) -> list[Node]:
    if isinstance(node, DictNode | TupleNode):
        return [leaf for child in node.children for leaf in _leaf_nodes(child)]
    return [node]


def _int_dtype(spec: spaces_pb.SpaceSpec, path: str, what: str) -> np.dtype:
    # An unset dtype on a Discrete/MultiDiscrete means the wire default, INT64.
    if int(spec.dtype) == 0:
        return np.dtype("<i8")
    dt = numpy_of_dtype(spec.dtype, path=path)
    if dt.kind not in INT_KINDS:
        raise ProtocolError(f"[{what}] dtype must be an integer type, got {dt.name}", path=path)
    return dt


def _build(spec: spaces_pb.SpaceSpec, path: str, counter: list[int]) -> Node:
    """The node of ``spec``; ``counter[0]`` is the next leaf index (leaves number depth-first)."""
    kind = spec_kind(spec, path)
    if kind == "dict":
        return _build_dict(spec, path, counter)
    if kind == "tuple":
        t = spec.tuple
        assert t is not None
        return TupleNode(
            path, tuple(_build(s, child_path(path, i), counter) for i, s in enumerate(t.spaces))
        )
    index = counter[0]
    counter[0] += 1
    return _LEAF_BUILDERS[kind](spec, path, index, check_shape(spec, path))


def _build_dict(spec: spaces_pb.SpaceSpec, path: str, counter: list[int]) -> Node:
    d = spec.dict
    assert d is not None
    if len(d.keys) != len(d.spaces):
        raise ProtocolError(f"[Dict] {len(d.keys)} keys but {len(d.spaces)} spaces", path=path)
    keys = tuple(d.keys)
    if len(set(keys)) != len(keys):
        raise ProtocolError(f"[Dict] duplicate keys in {list(keys)}", path=path)
    children = tuple(
        _build(s, child_path(path, k), counter) for k, s in zip(keys, d.spaces, strict=True)
    )
    order = KEY_ORDER.get(d)
    if order is None or sorted(order) != sorted(keys):
        order = keys
    return DictNode(path, keys, children, order)


def _box(spec: spaces_pb.SpaceSpec, path: str, index: int, shape: tuple[int, ...]) -> Node:
    if len(shape) == 0:
        raise ProtocolError("[Box] shape must be set (rank >= 1)", path=path)
    dt = numpy_of_dtype(spec.dtype, path=path)
    box_bounds(spec, dt, shape, path)  # validates the bound byte lengths
    return BoxLeaf(path, index, dt, shape)


def _discrete(spec: spaces_pb.SpaceSpec, path: str, index: int, shape: tuple[int, ...]) -> Node:
    ds = spec.discrete
    assert ds is not None
    if ds.n <= 0:
        raise ProtocolError(f"[Discrete] n must be > 0, got {ds.n}", path=path)
    return DiscreteLeaf(path, index, _int_dtype(spec, path, "Discrete"), ds.n, ds.start)


def _multi_binary(spec: spaces_pb.SpaceSpec, path: str, index: int, shape: tuple[int, ...]) -> Node:
    # One byte per element whatever dtype the spec declares.
    return MultiBinaryLeaf(path, index, U8, shape)


def _multi_discrete(
    spec: spaces_pb.SpaceSpec, path: str, index: int, shape: tuple[int, ...]
) -> Node:
    md = spec.multi_discrete
    assert md is not None
    nvec = np.asarray(list(md.nvec), dtype=np.int64)
    numel = int(np.prod(shape, dtype=np.int64))
    if nvec.size != numel:
        raise ProtocolError(
            f"[MultiDiscrete] nvec has {nvec.size} entries, shape {list(shape)} needs {numel}",
            path=path,
        )
    return MultiDiscreteLeaf(
        path, index, _int_dtype(spec, path, "MultiDiscrete"), shape, nvec.reshape(shape)
    )


def _text(spec: spaces_pb.SpaceSpec, path: str, index: int, shape: tuple[int, ...]) -> Node:
    return TextLeaf(path, index)


#: One builder per leaf ``spec_kind`` (Dict and Tuple recurse in ``_build``).
_LEAF_BUILDERS: dict[str, Callable[[spaces_pb.SpaceSpec, str, int, tuple[int, ...]], Node]] = {
    "box": _box,
    "discrete": _discrete,
    "multi_binary": _multi_binary,
    "multi_discrete": _multi_discrete,
    "text": _text,
}


_CODECS: IdentityCache[Codec] = IdentityCache()


def compile_spec(spec: spaces_pb.SpaceSpec) -> Codec:
    """Compile (or fetch the cached compilation of) a spec.

    The cache is keyed by the spec object's identity: treat specs as immutable
    once used with the codec.
    """
    codec = _CODECS.get(spec)
    if codec is None:
        if not isinstance(spec, spaces_pb.SpaceSpec):
            raise ProtocolError(f"expected a SpaceSpec, got {type(spec).__name__}", path="$")
        counter = [0]
        root = _build(spec, "$", counter)
        codec = Codec(root, counter[0])
        _CODECS.put(spec, codec)
    return codec
