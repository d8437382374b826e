"""Spec conversion and codec round trips over every gymnasium space kind and all 12 dtypes."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio._protocol import spaces_pb
from rlmesh_trio.spaces import (
    decode,
    decode_batch,
    decode_stacked,
    encode,
    encode_batch,
    encode_stacked,
    from_gymnasium,
    to_gymnasium,
)

DT = spaces_pb.DataType
ALL_DTYPES = [
    (np.bool_, DT.BOOL),
    (np.uint8, DT.UINT8),
    (np.uint16, DT.UINT16),
    (np.uint32, DT.UINT32),
    (np.uint64, DT.UINT64),
    (np.int8, DT.INT8),
    (np.int16, DT.INT16),
    (np.int32, DT.INT32),
    (np.int64, DT.INT64),
    (np.float16, DT.FLOAT16),
    (np.float32, DT.FLOAT32),
    (np.float64, DT.FLOAT64),
]


def assert_same(a: Any, b: Any) -> None:
    """Structural equality of decoded values (arrays compared with dtype and shape)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        b = np.asarray(b)
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def sample_spaces() -> list[gym.Space[Any]]:
    inner = gym.spaces.Dict(
        {
            "md": gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
            "pair": gym.spaces.Tuple((gym.spaces.Discrete(3, start=-1), gym.spaces.Text(6))),
        }
    )
    return [
        *[gym.spaces.Box(0, 1, (2, 3), dt) for dt, _ in ALL_DTYPES],
        gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        gym.spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, 2.0]), dtype=np.float64),
        gym.spaces.Discrete(7),
        gym.spaces.Discrete(3, start=5),
        gym.spaces.MultiBinary(5),
        gym.spaces.MultiBinary([2, 3, 2]),
        gym.spaces.MultiDiscrete([3, 5, 2]),
        gym.spaces.Text(12),
        gym.spaces.Text(5, min_length=2, charset="xyzé"),
        gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (1,), np.float32))),
        gym.spaces.Dict({"b": gym.spaces.Discrete(4), "a": inner, "c": gym.spaces.MultiBinary(2)}),
    ]


@pytest.mark.parametrize("dtype,code", ALL_DTYPES, ids=[c.name for _, c in ALL_DTYPES])
def test_box_dtype_maps_one_to_one(dtype: type, code: DT) -> None:
    space = gym.spaces.Box(0, 1, (3,), dtype)
    spec = from_gymnasium(space)
    assert spec.dtype == code and list(spec.shape) == [3]
    back = to_gymnasium(spec)
    assert back == space and back.dtype == np.dtype(dtype)


@pytest.mark.parametrize("space", sample_spaces(), ids=repr)
def test_sample_round_trip_every_kind(space: gym.Space[Any]) -> None:
    space.seed(1)
    spec = from_gymnasium(space)
    for _ in range(5):
        value = space.sample()
        back = decode(spec, encode(spec, value))
        assert space.contains(back)
        assert_same(back, value)
    # The spec survives the wire and describes the same space.
    wire = spaces_pb.SpaceSpec.parse(bytes(spec))
    assert bytes(from_gymnasium(to_gymnasium(wire))) == bytes(spec)


@pytest.mark.parametrize("space", sample_spaces(), ids=repr)
@pytest.mark.parametrize("n", [1, 3, 8])
def test_batch_and_stacked_agree(space: gym.Space[Any], n: int) -> None:
    space.seed(n)
    spec = from_gymnasium(space)
    values = [space.sample() for _ in range(n)]
    batch = encode_batch(spec, values)
    lanes = decode_batch(spec, batch, n)
    assert len(lanes) == n
    for got, want in zip(lanes, values, strict=True):
        assert space.contains(got)
        assert_same(got, want)
    stacked = decode_stacked(spec, batch, n)
    assert encode_stacked(spec, stacked, n).leaves == batch.leaves
    # Lanes are laid out lane-major: lane i's bytes equal its one-lane encoding.
    for i, value in enumerate(values):
        one = encode(spec, value)
        for leaf_batch, leaf_one in zip(batch.leaves, one.leaves, strict=True):
            if len(leaf_one) and not isinstance(space, gym.spaces.Text):
                stride = len(leaf_one)
                if stride * n == len(leaf_batch):
                    assert leaf_batch[i * stride : (i + 1) * stride] == leaf_one


def test_stacked_forms() -> None:
    space = gym.spaces.Dict(
        {
            "img": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
            "act": gym.spaces.Discrete(3),
            "note": gym.spaces.Text(4),
            "pair": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.MultiDiscrete([2, 3]))),
        }
    )
    spec = from_gymnasium(space)
    n = 4
    stacked = {
        "img": np.arange(n * 48, dtype=np.uint8).reshape(n, 4, 4, 3),
        "act": np.array([0, 1, 2, 1]),
        "note": ["a", "bb", "ccc", "dddd"],
        "pair": (np.array([[0, 1]] * n), np.array([[1, 2]] * n)),
    }
    value = encode_stacked(spec, stacked, n)
    back = decode_stacked(spec, value, n)
    assert list(back) == list(space.spaces)  # gymnasium's order (it sorts plain dicts)
    assert back["img"].shape == (n, 4, 4, 3) and back["img"].dtype == np.uint8
    assert back["act"].dtype == np.int64 and back["act"].tolist() == [0, 1, 2, 1]
    assert back["note"] == stacked["note"]
    assert isinstance(back["pair"], tuple)
    assert back["pair"][0].dtype == np.int8 and back["pair"][1].dtype == np.int64
    lanes = decode_batch(spec, value, n)
    assert all(space.contains(lane) for lane in lanes)


def test_decoded_arrays_are_writable_unless_copy_false() -> None:
    spec = from_gymnasium(gym.spaces.Box(0, 1, (3,), np.float32))
    value = encode(spec, np.zeros(3, np.float32))
    arr = decode(spec, value)
    arr[0] = 1.0  # a copy: writable, does not touch the message
    assert value.leaves[0] == bytes(12)
    view = decode_stacked(spec, value, 1, copy=False)
    assert view.shape == (1, 3) and not view.flags.writeable


def test_zero_lanes() -> None:
    spec = from_gymnasium(
        gym.spaces.Dict({"t": gym.spaces.Text(3), "b": gym.spaces.Box(0, 1, (2,))})
    )
    value = encode_batch(spec, [])
    assert value.leaves == [b"", (0).to_bytes(8, "little")]
    assert decode_batch(spec, value, 0) == []


def _int32_discrete(n: int) -> gym.spaces.Discrete:
    """A Discrete whose numpy dtype is int32. ``dtype=`` arrived after gymnasium 1.1;
    before it, the space's public ``dtype`` attribute is set instead."""
    if "dtype" in inspect.signature(gym.spaces.Discrete).parameters:
        return gym.spaces.Discrete(n, dtype=np.int32)  # type: ignore[call-arg, unused-ignore]
    space = gym.spaces.Discrete(n)
    space.dtype = np.dtype(np.int32)  # type: ignore[assignment, unused-ignore]
    return space


def test_discrete_wire_dtype_always_int64() -> None:
    spec = from_gymnasium(_int32_discrete(4))
    assert spec.dtype == DT.INT64
    assert len(encode(spec, np.int32(3)).leaves[0]) == 8


def test_discrete_peer_declared_width_is_used() -> None:
    spec = spaces_pb.SpaceSpec(dtype=DT.INT32, discrete=spaces_pb.DiscreteSpec(n=3, start=1))
    value = encode_batch(spec, [1, 3])
    assert value.leaves == [bytes.fromhex("01000000 03000000")]
    assert decode_batch(spec, value, 2) == [1, 3]


def test_discrete_value_is_absolute() -> None:
    spec = from_gymnasium(gym.spaces.Discrete(3, start=1))
    assert encode(spec, 3).leaves == [bytes.fromhex("0300000000000000")]


def test_multi_binary_nonzero_reads_as_one() -> None:
    spec = from_gymnasium(gym.spaces.MultiBinary(3))
    back = decode(spec, spaces_pb.SpaceValue(leaves=[bytes([0, 7, 255])]))
    assert back.dtype == np.int8 and back.tolist() == [0, 1, 1]


def test_bool_box_nonzero_reads_as_true() -> None:
    spec = from_gymnasium(gym.spaces.Box(0, 1, (2,), bool))
    back = decode(spec, spaces_pb.SpaceValue(leaves=[bytes([2, 0])]))
    assert back.dtype == np.bool_ and back.tolist() == [True, False]


def test_multi_discrete_start_dropped_with_warning() -> None:
    space = gym.spaces.MultiDiscrete([3, 4], start=[1, -1])
    with pytest.warns(UserWarning, match="start"):
        spec = from_gymnasium(space)
    assert spec.multi_discrete is not None and list(spec.multi_discrete.nvec) == [3, 4]
    rebuilt = to_gymnasium(spec)
    assert isinstance(rebuilt, gym.spaces.MultiDiscrete)
    assert rebuilt.start.tolist() == [0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_gymnasium(gym.spaces.MultiDiscrete([3, 4]))  # zero start: silent


def test_text_charset_conventions() -> None:
    spec = from_gymnasium(gym.spaces.Text(5))
    assert spec.text is not None and spec.text.charset == ""
    assert spec.dtype == DT.UINT8 and list(spec.shape) == []
    assert (spec.text.min_length, spec.text.max_length) == (1, 5)
    custom = from_gymnasium(gym.spaces.Text(5, min_length=2, charset="cba"))
    assert custom.text is not None and custom.text.charset == "abc"
    back = to_gymnasium(custom)
    assert isinstance(back, gym.spaces.Text) and back.character_set == frozenset("abc")
    assert back.min_length == 2


def test_box_bounds_kinds() -> None:
    unb = from_gymnasium(gym.spaces.Box(-np.inf, np.inf, (2, 2), np.float16)).box
    assert unb is not None and unb.unbounded is True
    half = from_gymnasium(gym.spaces.Box(-np.inf, 1, (2,), np.float32)).box
    assert half is not None and half.uniform is not None
    assert half.uniform.low == np.float32(-np.inf).tobytes()
    ew = from_gymnasium(
        gym.spaces.Box(np.array([0.0, 1.0], np.float32), np.array([2.0, 2.0], np.float32))
    ).box
    assert ew is not None and ew.elementwise is not None and len(ew.elementwise.low) == 8
    # Rebuilt bounds match the original.
    for space in [
        gym.spaces.Box(-np.inf, np.inf, (2, 2), np.float16),
        gym.spaces.Box(np.array([0, -5]), np.array([3, 3]), dtype=np.int32),
        gym.spaces.Box(0, 255, (2, 2), np.uint8),
    ]:
        assert to_gymnasium(from_gymnasium(space)) == space


def test_unbounded_integer_box_from_peer_uses_dtype_range() -> None:
    spec = spaces_pb.SpaceSpec(shape=[2], dtype=DT.INT16, box=spaces_pb.BoxSpec(unbounded=True))
    space = to_gymnasium(spec)
    assert isinstance(space, gym.spaces.Box)
    assert space.low.tolist() == [-32768, -32768] and space.high.tolist() == [32767, 32767]


def test_nested_dict_tuple_depth() -> None:
    space: gym.Space[Any] = gym.spaces.Discrete(2)
    for depth in range(5):
        if depth % 2:
            space = gym.spaces.Tuple((space, gym.spaces.Box(-1, 1, (1,), np.float32)))
        else:
            space = gym.spaces.Dict({"x": space, "t": gym.spaces.Text(3)})
    spec = from_gymnasium(space)
    wire = spaces_pb.SpaceSpec.parse(bytes(spec))
    assert to_gymnasium(wire) == space
    space.seed(3)
    value = space.sample()
    assert space.contains(decode(wire, encode(wire, value)))


def test_encode_casts_compatible_inputs() -> None:
    box = from_gymnasium(gym.spaces.Box(-1, 1, (2,), np.float32))
    assert encode(box, [0.5, -1.0]).leaves == [np.array([0.5, -1.0], np.float32).tobytes()]
    ibox = from_gymnasium(gym.spaces.Box(0, 10, (2,), np.uint8))
    assert encode(ibox, np.array([3, 4], np.int64)).leaves == [bytes([3, 4])]
    assert encode(ibox, [3.0, 4.0]).leaves == [bytes([3, 4])]
    disc = from_gymnasium(gym.spaces.Discrete(4))
    assert encode(disc, np.array(2)).leaves == encode(disc, 2).leaves
    assert encode(disc, 2.0).leaves == encode(disc, 2).leaves


def test_spec_cache_follows_identity() -> None:
    space = gym.spaces.Dict({"b": gym.spaces.Discrete(2), "a": gym.spaces.Discrete(3)})
    spec = from_gymnasium(space)
    v1 = encode(spec, {"a": 1, "b": 0})
    # A different spec object with the same bytes compiles to the same codec behaviour.
    other = spaces_pb.SpaceSpec.parse(bytes(spec))
    assert encode(other, {"a": 1, "b": 0}).leaves == v1.leaves


def test_dict_keys_sorted_bytewise() -> None:
    space = gym.spaces.Dict([(k, gym.spaces.Discrete(2)) for k in ["é", "z", "Z", "a", "ab", "€"]])
    spec = from_gymnasium(space)
    assert spec.dict is not None
    assert list(spec.dict.keys) == sorted(["é", "z", "Z", "a", "ab", "€"], key=str.encode)
    assert list(spec.dict.keys) == ["Z", "a", "ab", "z", "é", "€"]
