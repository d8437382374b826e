"""MetaMap / MetaValue conversion (§3.7): normalisation order, kinds, paths in errors."""

from __future__ import annotations

import enum
from collections import namedtuple
from typing import Any

import betterproto2
import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio._protocol import spaces_pb
from rlmesh_trio.spaces import meta_from_python, meta_map_from_python, meta_to_python


def kind(value: spaces_pb.MetaValue) -> str | None:
    return betterproto2.which_one_of(value, "kind")[0] or None


def wire(obj: Any) -> Any:
    """Convert, serialise, parse back and convert to Python."""
    meta = meta_from_python(obj)
    return meta_to_python(type(meta).parse(bytes(meta)))


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Weird(enum.Enum):
    X = object()


@pytest.mark.parametrize(
    "obj,expected_kind",
    [
        (True, "bool"),
        (np.bool_(False), "bool"),
        (3, "integer"),
        (np.int16(-4), "integer"),
        (np.uint64(7), "integer"),
        (2.5, "number"),
        (np.float32(0.5), "number"),
        ("hé", "text"),
        (b"\x00\xff", "bytes"),
        ([1, "a"], "list"),
        ((1, 2), "list"),
        (np.arange(3), "list"),
        ({"a": 1}, "map"),
        (None, None),
    ],
)
def test_value_kinds(obj: Any, expected_kind: str | None) -> None:
    meta = meta_from_python([obj])
    assert isinstance(meta, spaces_pb.MetaValue) and meta.list is not None
    assert kind(meta.list.items[0]) == expected_kind


def test_bool_is_not_an_integer() -> None:
    meta = meta_from_python({"t": True, "n": 1})
    assert isinstance(meta, spaces_pb.MetaMap)
    assert kind(meta.entries["t"]) == "bool" and kind(meta.entries["n"]) == "integer"


def test_none_is_an_empty_message() -> None:
    meta = meta_from_python({"x": None})
    assert bytes(meta.entries["x"]) == b""  # type: ignore[union-attr]
    assert wire({"x": None}) == {"x": None}


def test_round_trip_nested() -> None:
    obj = {
        "ints": np.array([[1, 2], [3, 4]], np.int32),
        "scalar": np.float64(1.5),
        "flags": [True, False, None],
        "inner": {"bytes": b"ab", "text": "x", "deep": {"l": [[1], [2.0]]}},
        "tuple": (1, "two"),
    }
    assert wire(obj) == {
        "ints": [[1, 2], [3, 4]],
        "scalar": 1.5,
        "flags": [True, False, None],
        "inner": {"bytes": b"ab", "text": "x", "deep": {"l": [[1], [2.0]]}},
        "tuple": [1, "two"],
    }


def test_namedtuple_becomes_map() -> None:
    Point = namedtuple("Point", "x y")
    assert isinstance(meta_from_python(Point(1, 2)), spaces_pb.MetaMap)
    assert wire({"p": Point(1, np.int8(2))}) == {"p": {"x": 1, "y": 2}}


def test_enums_use_value_else_name() -> None:
    assert wire({"a": Color.RED, "b": Color.BLUE, "c": Weird.X}) == {
        "a": "red",
        "b": 2,
        "c": "X",
    }
    # gymnasium's vector autoreset mode travels as its value.
    assert wire({"m": gym.vector.AutoresetMode.NEXT_STEP}) == {"m": "NextStep"}


def test_vector_info_layout() -> None:
    info = {"t": np.array([1, 1]), "_t": np.array([True, True])}
    assert wire(info) == {"t": [1, 1], "_t": [True, True]}


def test_meta_map_from_python() -> None:
    assert bytes(meta_map_from_python(None)) == b""
    assert meta_to_python(meta_map_from_python({"a": 1})) == {"a": 1}
    with pytest.raises(TypeError, match=r"\$: expected a dict"):
        meta_map_from_python([1])  # type: ignore[arg-type]


def test_meta_to_python_accepts_values_and_none() -> None:
    assert meta_to_python(None) is None
    assert meta_to_python(spaces_pb.MetaValue()) is None
    assert meta_to_python(spaces_pb.MetaValue(integer=0)) == 0
    assert meta_to_python(spaces_pb.MetaValue(text="")) == ""


@pytest.mark.parametrize(
    "obj,pattern",
    [
        ({"a": {"b": [1, object()]}}, r"\$\.a\.b\[1\]: cannot convert object"),
        ({"a": {1: 2}}, r"\$\.a: map keys must be str, got int"),
        ({"s": {1, 2}}, r"\$\.s: cannot convert set"),
        ({"big": 2**70}, r"\$\.big: integer .* does not fit in int64"),
        (np.array([1j]), r"\$\[0\]: cannot convert complex"),
    ],
)
def test_unconvertible_values_name_the_path(obj: Any, pattern: str) -> None:
    with pytest.raises(TypeError, match=pattern):
        meta_from_python(obj)
