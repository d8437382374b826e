"""The Text leaf: a slab of a u64 lane count, one u64 byte length per lane, then UTF-8 bodies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._errors import ProtocolError
from ._node import Node
from ._values import SMALL_LANES, U64, struct_for

__all__ = ["TextLeaf"]


class TextLeaf(Node):
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
        header = struct_for(U64, n + 1).pack(n, *[len(b) for b in bodies])
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
        if n <= SMALL_LANES:
            lengths: list[int] = list(struct_for(U64, n).unpack_from(raw, 8))
        else:
            lengths = np.frombuffer(raw, dtype=U64, count=n, offset=8).tolist()
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
