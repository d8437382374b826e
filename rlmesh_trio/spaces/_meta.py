"""Python values <-> ``MetaValue`` / ``MetaMap`` (infos, metadata, reset options; §3.7).

The conversion order matters and follows 0.1.0: a namedtuple becomes its
``_asdict()``, a numpy array its ``tolist()``, a numpy scalar its ``item()``;
``bool`` is tested before ``int`` (``bool`` subclasses ``int``), and an enum
becomes its ``.value`` when that is itself convertible, else its ``.name``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import betterproto2
import numpy as np

from .._protocol import spaces_pb

__all__ = ["meta_from_python", "meta_map_from_python", "meta_to_python"]

_MetaAny = spaces_pb.MetaValue | spaces_pb.MetaMap | spaces_pb.MetaList


def _normalise(obj: Any) -> Any:
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):
        obj = obj._asdict()
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    elif isinstance(obj, np.generic):
        obj = obj.item()
    return obj


def _value(obj: Any, path: str) -> spaces_pb.MetaValue:
    obj = _normalise(obj)
    if obj is None:
        return spaces_pb.MetaValue()
    if isinstance(obj, bool):
        return spaces_pb.MetaValue(bool=obj)
    if isinstance(obj, enum.Enum):
        # gymnasium's AutoresetMode.NEXT_STEP has value "NextStep": that is what goes out.
        inner = obj.value
        if inner is None or isinstance(inner, bool | int | float | str | bytes):
            return _value(inner, path)
        return spaces_pb.MetaValue(text=obj.name)
    if isinstance(obj, int):
        if not -(2**63) <= obj < 2**63:
            raise TypeError(f"{path}: integer {obj} does not fit in int64")
        return spaces_pb.MetaValue(integer=obj)
    if isinstance(obj, float):
        return spaces_pb.MetaValue(number=obj)
    if isinstance(obj, str):
        return spaces_pb.MetaValue(text=obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        return spaces_pb.MetaValue(bytes=bytes(obj))
    if isinstance(obj, Mapping):
        return spaces_pb.MetaValue(map=_map(obj, path))
    if isinstance(obj, list | tuple):
        return spaces_pb.MetaValue(
            list=spaces_pb.MetaList(items=[_value(v, f"{path}[{i}]") for i, v in enumerate(obj)])
        )
    raise TypeError(f"{path}: cannot convert {type(obj).__name__} to a MetaValue")


def _map(obj: Mapping[Any, Any], path: str) -> spaces_pb.MetaMap:
    entries: dict[str, spaces_pb.MetaValue] = {}
    for key, v in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"{path}: map keys must be str, got {type(key).__name__} {key!r}")
        entries[key] = _value(v, f"{path}.{key}")
    return spaces_pb.MetaMap(entries=entries)


def meta_map_from_python(obj: Mapping[str, Any] | None) -> spaces_pb.MetaMap:
    """Convert a dict (or ``None``, giving an empty map) to a ``MetaMap``."""
    if obj is None:
        return spaces_pb.MetaMap()
    obj = _normalise(obj)
    if not isinstance(obj, Mapping):
        raise TypeError(f"$: expected a dict for a MetaMap, got {type(obj).__name__}")
    return _map(obj, "$")


def meta_from_python(obj: Any) -> spaces_pb.MetaMap | spaces_pb.MetaValue:
    """Convert a Python value: a dict or namedtuple gives a ``MetaMap``, else a ``MetaValue``.

    Raises ``TypeError`` naming the path (``$.a[2]``) of a value with no wire form.
    """
    norm = _normalise(obj)
    if isinstance(norm, Mapping):
        return _map(norm, "$")
    return _value(norm, "$")


def meta_to_python(meta: _MetaAny | None) -> Any:
    """Convert a ``MetaMap`` to a dict, or a ``MetaValue`` to its Python value.

    A ``MetaValue`` with no kind set is ``None``; lists and maps convert recursively.
    """
    if meta is None:
        return None
    if isinstance(meta, spaces_pb.MetaMap):
        return {k: meta_to_python(v) for k, v in meta.entries.items()}
    if isinstance(meta, spaces_pb.MetaList):
        return [meta_to_python(v) for v in meta.items]
    name, inner = betterproto2.which_one_of(meta, "kind")
    if isinstance(inner, spaces_pb.MetaList | spaces_pb.MetaMap):
        return meta_to_python(inner)
    return inner if name else None
