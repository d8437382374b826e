"""Fixed-stride leaves: Box, Discrete, MultiBinary and MultiDiscrete slabs.

Every lane is the same number of bytes, so a whole slab moves through numpy
(``frombuffer`` on decode, ``tobytes`` on encode) with no per-element Python
work; small Discrete batches use ``struct`` instead, which beats numpy there.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import ProtocolError
from ._dtypes import INT_KINDS
from ._node import Node
from ._values import (
    NATIVE_I64,
    SMALL_ELEMS,
    SMALL_LANES,
    U8,
    as_array,
    check_lanes_shape,
    first_lane,
    struct_for,
    to_integer,
)

__all__ = ["BoxLeaf", "DiscreteLeaf", "FixedLeaf", "MultiBinaryLeaf", "MultiDiscreteLeaf"]


class FixedLeaf(Node):
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
        arr = as_array(stacked, self.path)
        if arr.dtype.kind == "f" and self.wire.kind in INT_KINDS and self.wire.itemsize == 8:
            if not isinstance(stacked, np.ndarray):
                # Python ints >= 2**63 make numpy pick float64 and lose digits: keep them exact.
                arr = np.array(stacked, dtype=object)
        check_lanes_shape(arr, n, self.shape, self.path)
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


class BoxLeaf(FixedLeaf):
    __slots__ = ()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        wire = self.wire
        if arr.dtype == wire:
            return arr
        kind = wire.kind
        if kind in INT_KINDS:
            return to_integer(arr, wire, self.path)
        if kind == "b":
            if arr.dtype.kind not in "biuf":
                raise ProtocolError(f"expected bools, got dtype {arr.dtype}", path=self.path)
            if arr.dtype.kind != "b":
                bad = (arr != 0) & (arr != 1)
                if bool(np.any(bad)):
                    lane, _ = first_lane(bad)
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
                lane, elem = first_lane(overflow)
                v = arr.reshape(arr.shape[0], -1)[lane, elem].item()
                raise ProtocolError(
                    f"lane {lane}: value {v!r} out of range for {wire.name}", path=self.path
                )
        return out

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> np.ndarray:
        if self.wire.kind == "b":
            # Read bytes, not numpy bools: a peer's 0x02 must still decode as True.
            return self._slab(leaves, n, U8) != 0
        return self._slab(leaves, n, self.wire).astype(self.native, copy=copy)


class DiscreteLeaf(FixedLeaf):
    __slots__ = ("high", "low")

    def __init__(self, path: str, index: int, wire: np.dtype, n: int, start: int) -> None:
        super().__init__(path, index, wire, ())
        self.low = start
        self.high = start + n  # exclusive

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        return to_integer(arr, self.wire, self.path)

    def _finish(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        out = arr.astype(NATIVE_I64, copy=copy)
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
        if n <= SMALL_LANES:
            # struct beats three numpy calls for the common one-lane action.
            raw = leaves[self.index]
            if len(raw) == n * self.stride:
                ints = list(struct_for(self.wire, n).unpack(raw))
                lo, hi = self.low, self.high
                if all(lo <= v < hi for v in ints):
                    return ints
        result: list[Any] = self.decode_stacked(leaves, n, copy).tolist()
        return result

    def encode_lanes(self, values: Sequence[Any], n: int, out: list[bytes]) -> None:
        if n <= SMALL_LANES and len(values) == n:
            try:
                out.append(struct_for(self.wire, n).pack(*values))
                return
            except (struct.error, TypeError):
                pass  # floats, out-of-range values, arrays: the checked path says why
        self.encode_stacked(values, n, out)


class MultiBinaryLeaf(FixedLeaf):
    __slots__ = ()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        if arr.dtype.kind not in "biuf":
            raise ProtocolError(f"expected 0/1 values, got dtype {arr.dtype}", path=self.path)
        # One byte per element whatever the dtype; any non-zero is 1 (as readers do).
        # A fresh bool array reinterpreted as bytes (0/1): no second copy.
        return np.not_equal(arr, 0).view(U8)

    def decode_stacked(self, leaves: Sequence[bytes], n: int, copy: bool) -> np.ndarray:
        # gymnasium's MultiBinary values are int8; the bool result is fresh, so view it.
        return np.not_equal(self._slab(leaves, n, U8), 0).view(np.int8)


class MultiDiscreteLeaf(FixedLeaf):
    __slots__ = ("nvec", "nvec_list")

    def __init__(
        self, path: str, index: int, wire: np.dtype, shape: tuple[int, ...], nvec: np.ndarray
    ) -> None:
        super().__init__(path, index, wire, shape)
        self.nvec = nvec
        self.nvec_list: list[int] = nvec.reshape(-1).tolist()

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        return to_integer(arr, self.wire, self.path)

    def _finish(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        out = arr.astype(NATIVE_I64, copy=copy)
        if out.size <= SMALL_ELEMS:
            # A Python pass beats four numpy calls on a handful of elements.
            nvec = self.nvec_list
            width = len(nvec)
            if all(0 <= v < nvec[i % width] for i, v in enumerate(out.reshape(-1).tolist())):
                return out
        bad = (out < 0) | (out >= self.nvec)
        if bool(np.any(bad)):
            lane, elem = first_lane(bad)
            v = int(out.reshape(out.shape[0], -1)[lane, elem])
            bound = int(self.nvec.reshape(-1)[elem])
            raise ProtocolError(
                f"lane {lane}: element {elem} value {v} not in range [0, {bound})", path=self.path
            )
        return out
