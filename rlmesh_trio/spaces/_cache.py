"""A small cache keyed by object identity, for unhashable protobuf messages.

betterproto2 messages define ``__eq__`` and so are unhashable; hashing their
bytes costs more than the codec call it would save. Entries live as long as
the key object does (a weakref callback drops them), and a hit re-checks the
referent so a recycled ``id`` can never return a stale entry.
"""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

__all__ = ["IdentityCache"]

V = TypeVar("V")


class IdentityCache(Generic[V]):
    """Map live objects (by identity) to values; entries vanish with their object."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[object], V]] = {}

    def get(self, key: object) -> V | None:
        entry = self._entries.get(id(key))
        if entry is None or entry[0]() is not key:
            return None
        return entry[1]

    def put(self, key: object, value: V) -> None:
        key_id = id(key)
        entries = self._entries

        def _drop(ref: weakref.ref[object], key_id: int = key_id) -> None:
            current = entries.get(key_id)
            if current is not None and current[0] is ref:
                del entries[key_id]

        entries[key_id] = (weakref.ref(key, _drop), value)

    def __len__(self) -> int:
        return len(self._entries)
