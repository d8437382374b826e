"""Value conversions and checks shared by the leaf codecs (casts, range and shape checks).

Every refusal is a :class:`~rlmesh_trio.ProtocolError` naming the leaf path and,
where a batch is involved, the first offending lane.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

from .._errors import ProtocolError
from ._dtypes import INT_KINDS

__all__ = [
    "NATIVE_I64",
    "SMALL_ELEMS",
    "SMALL_LANES",
    "U8",
    "U64",
    "as_array",
    "check_lanes_shape",
    "first_lane",
    "struct_for",
    "to_integer",
]

U64 = np.dtype("<u8")
SMALL_LANES = 16  # lane counts up to which Discrete and Text use ``struct`` instead of numpy
SMALL_ELEMS = 64  # element counts up to which range checks run in plain Python
U8 = np.dtype("u1")
NATIVE_I64 = np.dtype(np.int64)


@functools.lru_cache(maxsize=512)
def struct_for(dt: np.dtype, n: int) -> struct.Struct:
    """A little-endian ``struct`` packing ``n`` integers of ``dt`` (small slabs, text headers)."""
    return struct.Struct(f"<{n}{_STRUCT_CODES[dt.kind + str(dt.itemsize)]}")


_STRUCT_CODES = {
    "i1": "b", "i2": "h", "i4": "i", "i8": "q",
    "u1": "B", "u2": "H", "u4": "I", "u8": "Q",
}  # fmt: skip


def as_array(value: Any, path: str) -> np.ndarray:
    """``np.asarray`` that turns numpy's complaints (ragged lists, ...) into ``ProtocolError``."""
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"value is not an array of uniform shape: {exc}", path=path) from None


def first_lane(mask: np.ndarray) -> tuple[int, int]:
    """(lane, flat element index within the lane) of the first True in an ``(n, ...)`` mask."""
    flat = int(np.flatnonzero(mask.reshape(-1))[0])
    per_lane = max(1, int(np.prod(mask.shape[1:], dtype=np.int64)))
    return flat // per_lane, flat % per_lane


def _exact_int(v: Any) -> int:
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"{v!r} is not an integer")
    return int(v)


def to_integer(arr: np.ndarray, dt: np.dtype, path: str) -> np.ndarray:
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
        lane, elem = first_lane(bad)
        v = arr.reshape(arr.shape[0] if arr.ndim else 1, -1)[lane, elem].item()
        raise ProtocolError(
            f"lane {lane}: value {v!r} out of range for {dt.name} [{info.min}, {info.max}]"
            + (" or not an integer" if src.kind == "f" else ""),
            path=path,
        )
    return arr.astype(dt)


def check_lanes_shape(arr: np.ndarray, n: int, shape: tuple[int, ...], path: str) -> None:
    if arr.shape[:1] != (n,):
        got = arr.shape[0] if arr.ndim else "a scalar"
        raise ProtocolError(f"lane count mismatch: got {got} lanes, expected {n}", path=path)
    if arr.shape[1:] != shape:
        raise ProtocolError(
            f"shape mismatch: got per-lane shape {arr.shape[1:]}, expected {shape}", path=path
        )
