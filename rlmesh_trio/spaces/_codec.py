"""The ``SpaceValue`` codec: batch slabs over N lanes, in per-lane and stacked forms (§6).

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

Every malformed input, either direction, raises
:class:`~rlmesh_trio.ProtocolError` naming the leaf path and what was expected.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import ProtocolError
from .._wire import spaces_pb
from ._cache import IdentityCache
from ._dtypes import INT_KINDS, numpy_of_dtype
from ._spec import KEY_ORDER, box_bounds, check_shape, child_path, spec_kind

__all__ = [
    "Node",
    "compile_spec",
    "decode",
    "decode_batch",
    "decode_stacked",
    "encode",
    "encode_batch",
    "encode_stacked",
]

_U64 = np.dtype("<u8")
_SMALL = 16  # lane counts up to which Discrete and Text use ``struct`` instead of numpy
_SMALL_ELEMS = 64  # element counts up to which range checks run in plain Python
_U8 = np.dtype("u1")
_NATIVE_I64 = np.dtype(np.int64)


# --------------------------------------------------------------------------- helpers


@functools.lru_cache(maxsize=512)
def _struct_for(dt: np.dtype, n: int) -> struct.Struct:
    """A little-endian ``struct`` packing ``n`` integers of ``dt`` (small slabs, text headers)."""
    return struct.Struct(f"<{n}{_STRUCT_CODES[dt.kind + str(dt.itemsize)]}")


_STRUCT_CODES = {
    "i1": "b", "i2": "h", "i4": "i", "i8": "q",
    "u1": "B", "u2": "H", "u4": "I", "u8": "Q",
}  # fmt: skip


def _as_array(value: Any, path: str) -> np.ndarray:
    """``np.asarray`` that turns numpy's complaints (ragged lists, ...) into ``ProtocolError``."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"value is not an array of uniform shape: {exc}", path=path) from None


def _first_lane(mask: np.ndarray) -> tuple[int, int]:
    """(lane, flat element index within the lane) of the first True in an ``(n, ...)`` mask."""
    flat = int(np.flatnonzero(mask.reshape(-1))[0])
    per_lane = max(1, int(np.prod(mask.shape[1:], dtype=np.int64)))
    return flat // per_lane, flat % per_lane


def _exact_int(v: Any) -> int:
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"{v!r} is not an integer")
    return int(v)


def _to_integer(arr: np.ndarray, dt: np.dtype, path: str) -> np.ndarray:
    """Cast ``arr`` to integer dtype ``dt``, refusing values the dtype cannot hold."""
    src = arr.dtype
    if src == dt or src.kind == "b":
        return arr.astype(dt, copy=False)
    info = np.iinfo(dt)
    if src.kind in INT_KINDS:
        if np.can_cast(src, dt, "safe") or arr.size == 0:
            return arr.astype(dt, copy=False)
        bad = (arr < info.min) | (arr > info.max)
    elif src.kind == "f":
        # Compare against exact powers of two: float(2**63 - 1) rounds up to 2**63.
        bad = (
            ~np.isfinite(arr)
            | (arr < float(info.min))
            | (arr >= float(int(info.max) + 1))
            | (arr != np.floor(arr))
        )
    elif src.kind == "O":
        # Python ints beyond int64 land here; check them one by one (rare path).
        try:
            items = [_exact_int(v) for v in arr.reshape(-1).tolist()]
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProtocolError(f"expected integers for {dt.name}: {exc}", path=path) from None
        for i, v in enumerate(items):
            if not info.min <= v <= info.max:
                per_lane = max(1, int(np.prod(arr.shape[1:], dtype=np.int64)))
                raise ProtocolError(
                    f"lane {i // per_lane}: value {v} out of range for {dt.name} "
                    f"[{info.min}, {info.max}]",
                    path=path,
                )
        return np.array(items, dtype=dt).reshape(arr.shape)
    else:
        raise ProtocolError(f"expected integers for {dt.name}, got dtype {src}", path=path)
    if bool(np.any(bad)):
        lane, elem = _first_lane(bad)
        v = arr.reshape(arr.shape[0] if arr.ndim else 1, -1)[lane, elem].item()
        raise ProtocolError(
            f"lane {lane}: value {v!r} out of range for {dt.name} [{info.min}, {info.max}]"
            + (" or not an integer" if src.kind == "f" else ""),
            path=path,
        )
    return arr.astype(dt)


def _check_shape(arr: np.ndarray, n: int, shape: tuple[int, ...], path: str) -> None:
    if arr.shape[:1] != (n,):
        got = arr.shape[0] if arr.ndim else "a scalar"
        raise ProtocolError(f"lane count mismatch: got {got} lanes, expected {n}", path=path)
    if arr.shape[1:] != shape:
        raise ProtocolError(
            f"shape mismatch: got per-lane shape {arr.shape[1:]}, expected {shape}", path=path
        )


# --------------------------------------------------------------------------- nodes


class Node:
    """One compiled sub-space: encodes/decodes its leaves in per-lane and stacked forms."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        raise NotImplementedError

    def encode_stacked(self, stacked: Any, n: int, out: list[bytes]) -> None:
        raise NotImplementedError

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        raise NotImplementedError

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> Any:
        raise NotImplementedError


class _FixedLeaf(Node):
    """A fixed-stride leaf: every lane is ``numel`` elements of ``wire`` dtype."""

    __slots__ = ("index", "native", "shape", "stride", "wire")

    def __init__(self, path: str, index: int, wire: np.dtype, shape: tuple[int, ...]) -> None:
        super().__init__(path)
        self.index = index
        self.wire = wire
        self.native = wire.newbyteorder("=")
        self.shape = shape
        self.stride = int(np.prod(shape, dtype=np.int64)) * wire.itemsize

    # -- encode
    def _cast(self, arr: np.ndarray) -> np.ndarray:
        """Convert a stacked ``(n, *shape)`` array to the wire dtype (checked)."""
        raise NotImplementedError

    def encode_stacked(self, stacked: Any, n: int, out: list[bytes]) -> None:
        arr = _as_array(stacked, self.path)
        if arr.dtype.kind == "f" and self.wire.kind in INT_KINDS and self.wire.itemsize == 8:
            if not isinstance(stacked, np.ndarray):
                # Python ints >= 2**63 make numpy pick float64 and lose digits: keep them exact.
                arr = np.array(stacked, dtype=object)
        _check_shape(arr, n, self.shape, self.path)
        out.append(self._cast(arr).tobytes())

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        if n == 0:
            out.append(b"")  # np.asarray([]) has no per-lane shape to check
            return
        # np.asarray over a list of per-lane arrays stacks them in one C call.
        self.encode_stacked(values, n, out)

    # -- decode
    def _slab(self, leaves: Sequence[bytes], n: int, dtype: np.dtype) -> np.ndarray:
        raw = leaves[self.index]
        if len(raw) != n * self.stride:
            raise ProtocolError(
                f"length mismatch: slab: got {len(raw)} bytes, expected {n} lanes * {self.stride}",
                path=self.path,
            )
        return np.frombuffer(raw, dtype=dtype).reshape((n, *self.shape))

    def _finish(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        """Validate a raw ``(n, *shape)`` view and return the decoded array."""
        return arr.astype(self.native, copy=copy)

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> np.ndarray:
        return self._finish(self._slab(leaves, n, self.wire), copy)

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        return list(self.decode_stacked(leaves, n, copy))


class _BoxLeaf(_FixedLeaf):
    __slots__ = ()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        wire = self.wire
        if arr.dtype == wire:
            return arr
        kind = wire.kind
        if kind in INT_KINDS:
            return _to_integer(arr, wire, self.path)
        if kind == "b":
            if arr.dtype.kind not in "biuf":
                raise ProtocolError(f"expected bools, got dtype {arr.dtype}", path=self.path)
            if arr.dtype.kind != "b":
                bad = (arr != 0) & (arr != 1)
                if bool(np.any(bad)):
                    lane, _ = _first_lane(bad)
                    raise ProtocolError(
                        f"lane {lane}: value out of range for bool (0 or 1 only)", path=self.path
                    )
            return arr.astype(wire)
        if arr.dtype.kind not in "biuf":
            raise ProtocolError(
                f"expected numbers for {wire.name}, got dtype {arr.dtype}", path=self.path
            )
        with np.errstate(over="ignore"):
            out = arr.astype(wire)
        if arr.dtype.kind != "f" or arr.dtype.itemsize > wire.itemsize:
            # Narrowing (float64 -> float16, big ints -> float16): finite must stay finite.
            overflow = np.isinf(out) & ~np.isinf(arr)
            if bool(np.any(overflow)):
                lane, elem = _first_lane(overflow)
                v = arr.reshape(arr.shape[0], -1)[lane, elem].item()
                raise ProtocolError(
                    f"lane {lane}: value {v!r} out of range for {wire.name}", path=self.path
                )
        return out

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> np.ndarray:
        if self.wire.kind == "b":
            # Read bytes, not numpy bools: a peer's 0x02 must still decode as True.
            return self._slab(leaves, n, _U8) != 0
        return self._slab(leaves, n, self.wire).astype(self.native, copy=copy)


class _DiscreteLeaf(_FixedLeaf):
    __slots__ = ("high", "low")

    def __init__(self, path: str, index: int, wire: np.dtype, n: int, start: int) -> None:
        super().__init__(path, index, wire, ())
        self.low = start
        self.high = start + n  # exclusive

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        return _to_integer(arr, self.wire, self.path)

    def _finish(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        out = arr.astype(_NATIVE_I64, copy=copy)
        if out.size:
            lo, hi = int(out.min()), int(out.max())
            if lo < self.low or hi >= self.high:
                bad = (out < self.low) | (out >= self.high)
                lane = int(np.flatnonzero(bad)[0])
                raise ProtocolError(
                    f"lane {lane}: value {int(out[lane])} not in range [{self.low}, {self.high})",
                    path=self.path,
                )
        return out

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        # Python ints: gymnasium's Discrete.contains and every env accept them.
        if n <= _SMALL:
            # struct beats three numpy calls for the common one-lane action.
            raw = leaves[self.index]
            if len(raw) == n * self.stride:
                ints = list(_struct_for(self.wire, n).unpack(raw))
                lo, hi = self.low, self.high
                if all(lo <= v < hi for v in ints):
                    return ints
        result: list[Any] = self.decode_stacked(leaves, n, copy).tolist()
        return result

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        if n <= _SMALL and len(values) == n:
            try:
                out.append(_struct_for(self.wire, n).pack(*values))
                return
            except (struct.error, TypeError):
                pass  # floats, out-of-range values, arrays: the checked path says why
        self.encode_stacked(values, n, out)


class _MultiBinaryLeaf(_FixedLeaf):
    __slots__ = ()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        if arr.dtype.kind not in "biuf":
            raise ProtocolError(f"expected 0/1 values, got dtype {arr.dtype}", path=self.path)
        # One byte per element whatever the dtype; any non-zero is 1 (as readers do).
        # A fresh bool array reinterpreted as bytes (0/1): no second copy.
        return np.not_equal(arr, 0).view(_U8)

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> np.ndarray:
        # gymnasium's MultiBinary values are int8; the bool result is fresh, so view it.
        return np.not_equal(self._slab(leaves, n, _U8), 0).view(np.int8)


class _MultiDiscreteLeaf(_FixedLeaf):
    __slots__ = ("nvec", "nvec_list")

    def __init__(
        self, path: str, index: int, wire: np.dtype, shape: tuple[int, ...], nvec: np.ndarray
    ) -> None:
        super().__init__(path, index, wire, shape)
        self.nvec = nvec
        self.nvec_list: list[int] = nvec.reshape(-1).tolist()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        return _to_integer(arr, self.wire, self.path)

    def _finish(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        out = arr.astype(_NATIVE_I64, copy=copy)
        if out.size <= _SMALL_ELEMS:
            # A Python pass beats four numpy calls on a handful of elements.
            nvec = self.nvec_list
            width = len(nvec)
            if all(0 <= v < nvec[i % width] for i, v in enumerate(out.reshape(-1).tolist())):
                return out
        bad = (out < 0) | (out >= self.nvec)
        if bool(np.any(bad)):
            lane, elem = _first_lane(bad)
            v = int(out.reshape(out.shape[0], -1)[lane, elem])
            bound = int(self.nvec.reshape(-1)[elem])
            raise ProtocolError(
                f"lane {lane}: element {elem} value {v} not in range [0, {bound})", path=self.path
            )
        return out


class _TextLeaf(Node):
    __slots__ = ("index",)

    def __init__(self, path: str, index: int) -> None:
        super().__init__(path)
        self.index = index

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        if len(values) != n:
            raise ProtocolError(
                f"lane count mismatch: got {len(values)} lanes, expected {n}", path=self.path
            )
        bodies: list[bytes] = []
        for lane, text in enumerate(values):
            if not isinstance(text, str):
                raise ProtocolError(
                    f"lane {lane}: expected str, got {type(text).__name__}", path=self.path
                )
            try:
                bodies.append(text.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise ProtocolError(
                    f"lane {lane}: text is not UTF-8 encodable: {exc.reason}", path=self.path
                ) from None
        # Slab header: u64 count, then one u64 byte length per lane; then the bodies.
        header = _struct_for(_U64, n + 1).pack(n, *[len(b) for b in bodies])
        out.append(header + b"".join(bodies))

    def encode_stacked(self, stacked: Any, n: int, out: list[bytes]) -> None:
        if isinstance(stacked, np.ndarray):
            stacked = stacked.tolist()
        if isinstance(stacked, str | bytes) or not isinstance(stacked, Sequence):
            raise ProtocolError(
                f"expected a list of {n} str (one per lane), got {type(stacked).__name__}",
                path=self.path,
            )
        self.encode_lanes(stacked, n, out)

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        raw = leaves[self.index]
        size = len(raw)
        header_len = 8 * (n + 1)
        if size < 8:
            raise ProtocolError(
                f"length mismatch: text slab header truncated (got {size} bytes, "
                f"expected at least {header_len} for {n} lanes)",
                path=self.path,
            )
        count = int.from_bytes(raw[:8], "little")
        if count != n:
            raise ProtocolError(
                f"text slab count mismatch: header says {count} lanes, expected {n}",
                path=self.path,
            )
        if size < header_len:
            raise ProtocolError(
                f"length mismatch: text slab header truncated (got {size} bytes, "
                f"expected at least {header_len} for {n} lanes)",
                path=self.path,
            )
        if n <= _SMALL:
            lengths: list[int] = list(_struct_for(_U64, n).unpack_from(raw, 8))
        else:
            lengths = np.frombuffer(raw, dtype=_U64, count=n, offset=8).tolist()
        body = size - header_len
        # Python ints: a huge u64 length cannot wrap the sum.
        if sum(lengths) != body:
            shown = f"{lengths}" if n <= 8 else f"{lengths[:8]} (first 8 of {n})"
            raise ProtocolError(
                f"length mismatch: text bodies: got {body} bytes, header lengths "
                f"{shown} need {sum(lengths)}",
                path=self.path,
            )
        texts: list[Any] = []
        pos = header_len
        view = memoryview(raw)
        for lane, length in enumerate(lengths):
            end = pos + length
            try:
                texts.append(str(view[pos:end], "utf-8"))
            except UnicodeDecodeError as exc:
                raise ProtocolError(
                    f"lane {lane}: invalid UTF-8 in text body at byte {exc.start}: {exc.reason}",
                    path=self.path,
                ) from None
            pos = end
        return texts

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[str]:
        return self.decode_lanes(leaves, n, copy)


class _DictNode(Node):
    __slots__ = ("children", "keys", "order")

    def __init__(
        self, path: str, keys: tuple[str, ...], children: tuple[Node, ...], order: tuple[str, ...]
    ) -> None:
        super().__init__(path)
        self.keys = keys
        self.children = children
        self.order = order  # the key order of decoded dicts

    def _missing(self, value: Any, lane: int | None) -> ProtocolError:
        where = "" if lane is None else f"lane {lane}: "
        if not isinstance(value, Mapping):
            return ProtocolError(
                f"{where}expected a dict, got {type(value).__name__}", path=self.path
            )
        missing = sorted(set(self.keys) - set(value))
        extra = sorted(map(repr, set(value) - set(self.keys)))
        return ProtocolError(
            f"{where}dict keys mismatch: missing {missing}, unexpected [{', '.join(extra)}]",
            path=self.path,
        )

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        nkeys = len(self.keys)
        for lane, v in enumerate(values):
            if not isinstance(v, Mapping) or len(v) != nkeys:
                raise self._missing(v, lane)
        for key, child in zip(self.keys, self.children, strict=True):
            try:
                column = [v[key] for v in values]
            except KeyError:
                lane = next(i for i, v in enumerate(values) if key not in v)
                raise self._missing(values[lane], lane) from None
            child.encode_lanes(column, n, out)

    def encode_stacked(self, stacked: Any, n: int, out: list[bytes]) -> None:
        if not isinstance(stacked, Mapping) or len(stacked) != len(self.keys):
            raise self._missing(stacked, None)
        for key, child in zip(self.keys, self.children, strict=True):
            try:
                column = stacked[key]
            except KeyError:
                raise self._missing(stacked, None) from None
            child.encode_stacked(column, n, out)

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        columns = {
            key: child.decode_lanes(leaves, n, copy)
            for key, child in zip(self.keys, self.children, strict=True)
        }
        ordered = [(key, columns[key]) for key in self.order]
        return [{key: col[lane] for key, col in ordered} for lane in range(n)]

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> dict[str, Any]:
        columns = {
            key: child.decode_stacked(leaves, n, copy)
            for key, child in zip(self.keys, self.children, strict=True)
        }
        return {key: columns[key] for key in self.order}


class _TupleNode(Node):
    __slots__ = ("children",)

    def __init__(self, path: str, children: tuple[Node, ...]) -> None:
        super().__init__(path)
        self.children = children

    def _bad(self, value: Any, lane: int | None) -> ProtocolError:
        where = "" if lane is None else f"lane {lane}: "
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            return ProtocolError(
                f"{where}expected a tuple, got {type(value).__name__}", path=self.path
            )
        return ProtocolError(
            f"{where}tuple length mismatch: got {len(value)} items, expected {len(self.children)}",
            path=self.path,
        )

    def _ok(self, value: Any) -> bool:
        return (
            isinstance(value, Sequence)
            and not isinstance(value, str | bytes)
            and len(value) == len(self.children)
        )

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        for lane, v in enumerate(values):
            if not self._ok(v):
                raise self._bad(v, lane)
        for i, child in enumerate(self.children):
            child.encode_lanes([v[i] for v in values], n, out)

    def encode_stacked(self, stacked: Any, n: int, out: list[bytes]) -> None:
        if not self._ok(stacked):
            raise self._bad(stacked, None)
        for item, child in zip(stacked, self.children, strict=True):
            child.encode_stacked(item, n, out)

    def decode_lanes(self, leaves: Sequence[bytes], n: int, copy: bool) -> list[Any]:
        columns = [child.decode_lanes(leaves, n, copy) for child in self.children]
        if not columns:
            return [() for _ in range(n)]
        return list(zip(*columns, strict=True))

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> tuple[Any, ...]:
        return tuple(child.decode_stacked(leaves, n, copy) for child in self.children)


# --------------------------------------------------------------------------- compile


class Codec:
    """A compiled spec: the root node and how many leaves a value carries."""

    __slots__ = ("fixed", "n_leaves", "root", "texts")

    def __init__(self, root: Node, n_leaves: int) -> None:
        self.root = root
        self.n_leaves = n_leaves
        leaves = _leaf_nodes(root)
        # For check_batch: (leaf index, bytes per lane, path) of every fixed-stride leaf.
        self.fixed = tuple((f.index, f.stride, f.path) for f in leaves if isinstance(f, _FixedLeaf))
        self.texts = tuple(t for t in leaves if isinstance(t, _TextLeaf))


def _leaf_nodes(node: Node) -> list[Node]:
    if isinstance(node, _DictNode | _TupleNode):
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
    kind = spec_kind(spec, path)
    if kind in ("dict", "tuple"):
        if kind == "dict":
            d = spec.dict
            assert d is not None
            if len(d.keys) != len(d.spaces):
                raise ProtocolError(
                    f"[Dict] {len(d.keys)} keys but {len(d.spaces)} spaces", path=path
                )
            keys = tuple(d.keys)
            if len(set(keys)) != len(keys):
                raise ProtocolError(f"[Dict] duplicate keys in {list(keys)}", path=path)
            children = tuple(
                _build(s, child_path(path, k), counter) for k, s in zip(keys, d.spaces, strict=True)
            )
            order = KEY_ORDER.get(d)
            if order is None or sorted(order) != sorted(keys):
                order = keys
            return _DictNode(path, keys, children, order)
        t = spec.tuple
        assert t is not None
        return _TupleNode(
            path, tuple(_build(s, child_path(path, i), counter) for i, s in enumerate(t.spaces))
        )
    index = counter[0]
    counter[0] += 1
    shape = check_shape(spec, path)
    if kind == "box":
        if len(shape) == 0:
            raise ProtocolError("[Box] shape must be set (rank >= 1)", path=path)
        dt = numpy_of_dtype(spec.dtype, path=path)
        box_bounds(spec, dt, shape, path)  # validates the bound byte lengths
        return _BoxLeaf(path, index, dt, shape)
    if kind == "discrete":
        ds = spec.discrete
        assert ds is not None
        if ds.n <= 0:
            raise ProtocolError(f"[Discrete] n must be > 0, got {ds.n}", path=path)
        return _DiscreteLeaf(path, index, _int_dtype(spec, path, "Discrete"), ds.n, ds.start)
    if kind == "multi_binary":
        # One byte per element whatever dtype the spec declares.
        return _MultiBinaryLeaf(path, index, _U8, shape)
    if kind == "multi_discrete":
        md = spec.multi_discrete
        assert md is not None
        nvec = np.asarray(list(md.nvec), dtype=np.int64)
        numel = int(np.prod(shape, dtype=np.int64))
        if nvec.size != numel:
            raise ProtocolError(
                f"[MultiDiscrete] nvec has {nvec.size} entries, shape {list(shape)} needs {numel}",
                path=path,
            )
        return _MultiDiscreteLeaf(
            path, index, _int_dtype(spec, path, "MultiDiscrete"), shape, nvec.reshape(shape)
        )
    return _TextLeaf(path, index)


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


# --------------------------------------------------------------------------- public API


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
    """Encode ``len(values)`` per-lane values into one lane-major ``SpaceValue``."""
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
    """
    codec = compile_spec(spec)
    return codec.root.decode_lanes(_leaves(codec, value, n), n, copy)


def encode(spec: spaces_pb.SpaceSpec, value: Any) -> spaces_pb.SpaceValue:
    """Encode one value as a one-lane batch (the only form the wire has)."""
    codec = compile_spec(spec)
    out: list[bytes] = []
    codec.root.encode_lanes([value], 1, out)
    return spaces_pb.SpaceValue(leaves=out)


def decode(spec: spaces_pb.SpaceSpec, value: spaces_pb.SpaceValue, *, copy: bool = True) -> Any:
    """Decode a one-lane ``SpaceValue`` into one value (see :func:`decode_batch`)."""
    codec = compile_spec(spec)
    return codec.root.decode_lanes(_leaves(codec, value, 1), 1, copy)[0]


def encode_stacked(spec: spaces_pb.SpaceSpec, stacked: Any, n: int) -> spaces_pb.SpaceValue:
    """Encode leaves that carry a leading batch axis of length ``n``.

    Box/MultiBinary/MultiDiscrete -> array ``(n, *shape)``; Discrete -> ``(n,)``;
    Text -> ``list[str]``; Dict -> dict of stacked; Tuple -> tuple of stacked.
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
    Cheap enough for every step (no arrays are built); raises
    :class:`~rlmesh_trio.ProtocolError` naming the leaf path.
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
    """
    codec = compile_spec(spec)
    return codec.root.decode_stacked(_leaves(codec, value, n), n, copy)
