"""The compiled-node interface every sub-space codec implements (per-lane and stacked forms)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Node"]


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
