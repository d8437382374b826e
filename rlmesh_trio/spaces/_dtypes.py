"""The wire ``DataType`` table: numpy dtypes, element widths and integer ranges.

Every wire scalar is little-endian, so the numpy dtypes here are explicitly
``<``-ordered; on a little-endian host they are the native dtypes and the
codec's ``frombuffer``/``tobytes`` calls copy no more than once.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from .._errors import ProtocolError
from .._protocol import spaces_pb

__all__ = [
    "DT",
    "INT_KINDS",
    "dtype_of_numpy",
    "numpy_of_dtype",
]

DT = spaces_pb.DataType

_TABLE: Final[dict[int, np.dtype]] = {
    DT.BOOL.value: np.dtype("?"),
    DT.UINT8.value: np.dtype("u1"),
    DT.UINT16.value: np.dtype("<u2"),
    DT.UINT32.value: np.dtype("<u4"),
    DT.UINT64.value: np.dtype("<u8"),
    DT.INT8.value: np.dtype("i1"),
    DT.INT16.value: np.dtype("<i2"),
    DT.INT32.value: np.dtype("<i4"),
    DT.INT64.value: np.dtype("<i8"),
    DT.FLOAT16.value: np.dtype("<f2"),
    DT.FLOAT32.value: np.dtype("<f4"),
    DT.FLOAT64.value: np.dtype("<f8"),
}

# numpy's (kind, itemsize) identifies a dtype regardless of byte order, which
# lets a big-endian gymnasium Box still map onto its wire type.
_REVERSE: Final[dict[tuple[str, int], int]] = {
    (dt.kind, dt.itemsize): code for code, dt in _TABLE.items()
}

#: numpy kinds that carry integers (range-checked on encode).
INT_KINDS: Final[frozenset[str]] = frozenset("iu")


def numpy_of_dtype(code: int | DT, *, path: str, what: str = "dtype") -> np.dtype:
    """The little-endian numpy dtype of a wire ``DataType``; unknown or unset codes are refused."""
    value = int(code)
    try:
        return _TABLE[value]
    except KeyError:
        name = "DATA_TYPE_UNSPECIFIED" if value == 0 else f"unknown DataType {value}"
        raise ProtocolError(f"unsupported {what}: {name}", path=path) from None


def dtype_of_numpy(dtype: np.dtype | type, *, path: str) -> DT:
    """The wire ``DataType`` of a numpy dtype (one of the twelve), else ``ProtocolError``."""
    dt = np.dtype(dtype)
    code = _REVERSE.get((dt.kind, dt.itemsize))
    if code is None:
        raise ProtocolError(f"dtype {dt} has no wire DataType", path=path)
    return DT(code)
