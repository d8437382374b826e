"""Dict and Tuple nodes: walk a value tree into its children's leaves and back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ProtocolError
from ._node import Node

__all__ = ["DictNode", "TupleNode"]


class DictNode(Node):
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


class TupleNode(Node):
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
