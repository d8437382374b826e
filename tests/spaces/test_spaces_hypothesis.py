"""Property tests: random nested spaces (depth <= 3) round-trip through spec and codec, and
random bytes never escape as anything but ProtocolError."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmesh_trio import ProtocolError
from rlmesh_trio._protocol import spaces_pb
from rlmesh_trio.spaces import (
    decode_batch,
    decode_stacked,
    encode_batch,
    encode_stacked,
    from_gymnasium,
    to_gymnasium,
)

DTYPES = [
    np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8,
    np.int16, np.int32, np.int64, np.float16, np.float32, np.float64,
]  # fmt: skip

shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


@st.composite
def boxes(draw: st.DrawFn) -> gym.spaces.Box:
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(shapes)
    if dtype.kind == "b":
        return gym.spaces.Box(0, 1, shape, dtype)
    if dtype.kind == "f":
        bounds = draw(st.sampled_from(["unbounded", "uniform", "elementwise", "mixed"]))
        if bounds == "unbounded":
            return gym.spaces.Box(-np.inf, np.inf, shape, dtype)
        if bounds == "uniform":
            return gym.spaces.Box(-2, 3, shape, dtype)
        low = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 1
        high = low + 2
        if bounds == "mixed":
            low.reshape(-1)[0] = -np.inf
        return gym.spaces.Box(low, high, shape, dtype)
    lo = 0 if dtype.kind == "u" else -5
    if draw(st.booleans()):
        return gym.spaces.Box(lo, lo + 9, shape, dtype)
    low = np.full(shape, lo, dtype=dtype)
    low.reshape(-1)[-1] = lo + 1
    return gym.spaces.Box(low, np.full(shape, lo + 7, dtype=dtype), shape, dtype)


leaf_spaces = st.one_of(
    boxes(),
    st.builds(gym.spaces.Discrete, st.integers(1, 10), start=st.integers(-5, 5)),
    shapes.map(lambda s: gym.spaces.MultiBinary(list(s))),
    st.lists(st.integers(1, 6), min_size=1, max_size=4).map(gym.spaces.MultiDiscrete),
    st.integers(1, 8).flatmap(
        lambda mx: st.builds(
            gym.spaces.Text,
            st.just(mx),
            min_length=st.integers(1, mx),
            charset=st.sampled_from(["abc", "xyzé€", "0123456789"]),
        )
    ),
)

keys = st.text(alphabet="abZé_1", min_size=1, max_size=4)


def spaces(depth: int) -> st.SearchStrategy[gym.Space[Any]]:
    if depth == 0:
        return leaf_spaces
    child = spaces(depth - 1)
    return st.one_of(
        leaf_spaces,
        st.dictionaries(keys, child, min_size=1, max_size=3).map(
            lambda d: gym.spaces.Dict(list(d.items()))
        ),
        st.lists(child, min_size=1, max_size=3).map(lambda xs: gym.spaces.Tuple(xs)),
    )


def same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(space=spaces(3), n=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
def test_random_spaces_round_trip(space: gym.Space[Any], n: int, seed: int) -> None:
    spec = from_gymnasium(space)
    wire = spaces_pb.SpaceSpec.parse(bytes(spec))
    assert bytes(wire) == bytes(spec)
    rebuilt = to_gymnasium(wire)
    assert bytes(from_gymnasium(rebuilt)) == bytes(spec)

    space.seed(seed)
    values = [space.sample() for _ in range(n)]
    value = encode_batch(spec, values)
    lanes = decode_batch(spec, value, n)
    for got, want in zip(lanes, values, strict=True):
        assert space.contains(got)
        same(got, want)

    # The parsed spec (wire key order) decodes the same bytes to the same values.
    for got in decode_batch(wire, spaces_pb.SpaceValue.parse(bytes(value)), n):
        assert rebuilt.contains(got)

    stacked = decode_stacked(spec, value, n)
    assert encode_stacked(spec, stacked, n).leaves == value.leaves


@SETTINGS
@given(
    space=spaces(2),
    n=st.integers(0, 4),
    data=st.data(),
)
def test_random_bytes_only_raise_protocol_error(space: gym.Space[Any], n: int, data: Any) -> None:
    spec = from_gymnasium(space)
    space.seed(0)
    good = list(encode_batch(spec, [space.sample() for _ in range(n)]).leaves)
    mutated = data.draw(
        st.one_of(
            st.just(good),
            st.lists(st.binary(max_size=64), max_size=len(good) + 1),
            st.integers(0, max(0, len(good) - 1)).flatmap(
                lambda i: st.binary(max_size=48).map(
                    lambda b: [*good[:i], b, *good[i + 1 :]] if good else [b]
                )
            ),
        )
    )
    lanes = data.draw(st.sampled_from([n, n + 1, max(0, n - 1)]))
    try:
        decode_batch(spec, spaces_pb.SpaceValue(leaves=mutated), lanes)
        decode_stacked(spec, spaces_pb.SpaceValue(leaves=mutated), lanes)
    except ProtocolError as exc:
        assert exc.path is not None and exc.path.startswith("$")


garbage = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=4),
        st.binary(max_size=4),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=3),
    ),
    max_leaves=12,
)


@SETTINGS
@given(space=spaces(2), values=st.lists(garbage, min_size=1, max_size=3), data=st.data())
def test_garbage_values_only_raise_protocol_error(
    space: gym.Space[Any], values: list[Any], data: Any
) -> None:
    spec = from_gymnasium(space)
    try:
        encode_batch(spec, values)
    except ProtocolError as exc:
        assert exc.path is not None and exc.path.startswith("$")
    try:
        encode_stacked(spec, data.draw(garbage), len(values))
    except ProtocolError as exc:
        assert exc.path is not None and exc.path.startswith("$")
