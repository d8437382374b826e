"""Concatenate and split stacked values (leading batch axis) for fused batched calls.

A stacked value is what ``spaces.decode_stacked`` returns: an array for a
fundamental leaf, a ``list[str]`` for Text, a dict of stacked values for
Dict and a tuple of them for Tuple. Fusing several predict groups into one
``predict_batch`` call concatenates their stacked observations row-wise and
splits the stacked actions back by the groups' row counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["concat_rows", "leading_len", "split_rows"]


def leading_len(value: Any) -> int:
    """The length of a stacked value's leading axis (its first leaf's)."""
    while isinstance(value, Mapping | tuple):
        if not value:
            raise ValueError("an empty Dict/Tuple value has no leading axis")
        value = next(iter(value.values())) if isinstance(value, Mapping) else value[0]
    return len(value if isinstance(value, list | np.ndarray) else np.asarray(value))


def concat_rows(parts: Sequence[Any]) -> Any:
    """Concatenate stacked values of the same structure along their leading axis."""
    first = parts[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(parts, axis=0)
    if isinstance(first, Mapping):
        return {key: concat_rows([part[key] for part in parts]) for key in first}
    if isinstance(first, tuple):
        return tuple(concat_rows([part[i] for part in parts]) for i in range(len(first)))
    if isinstance(first, list):
        return [row for part in parts for row in part]
    return np.concatenate([np.asarray(part) for part in parts], axis=0)


def split_rows(value: Any, sizes: Sequence[int]) -> list[Any]:
    """Split a stacked value into consecutive pieces of ``sizes`` rows each.

    The leading axis must hold exactly ``sum(sizes)`` rows; a ``ValueError``
    otherwise (the policy returned the wrong number of actions).
    """
    total = sum(sizes)
    if isinstance(value, Mapping):
        per_key = {key: split_rows(sub, sizes) for key, sub in value.items()}
        return [{key: pieces[i] for key, pieces in per_key.items()} for i in range(len(sizes))]
    if isinstance(value, tuple):
        per_item = [split_rows(sub, sizes) for sub in value]
        return [tuple(pieces[i] for pieces in per_item) for i in range(len(sizes))]
    rows = value if isinstance(value, list | np.ndarray) else np.asarray(value)
    if len(rows) != total:
        raise ValueError(
            f"predict_batch received a batch of {total} observations but returned "
            f"{len(rows)} actions"
        )
    out: list[Any] = []
    start = 0
    for size in sizes:
        out.append(rows[start : start + size])
        start += size
    return out
