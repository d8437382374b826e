"""Every malformed spec or payload raises ProtocolError naming the leaf path and the mismatch."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import ProtocolError, RlmeshTrioError
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
SV = spaces_pb.SpaceValue


def raises(path: str, pattern: str) -> Any:
    """Expect a ProtocolError (exactly that class) at ``path`` whose detail matches ``pattern``."""

    class _Check:
        def __enter__(self) -> None:
            self._ctx = pytest.raises(ProtocolError)
            self._info = self._ctx.__enter__()

        def __exit__(self, *exc: Any) -> bool:
            handled = self._ctx.__exit__(*exc)
            err = self._info.value
            assert type(err) is ProtocolError and isinstance(err, RlmeshTrioError)
            assert err.path == path, f"path {err.path!r} != {path!r}: {err}"
            assert re.search(pattern, err.detail), f"{pattern!r} not in {err.detail!r}"
            assert str(err).startswith(f"protocol error: {path}: ")
            return bool(handled)

    return _Check()


@pytest.fixture(scope="module")
def nested() -> spaces_pb.SpaceSpec:
    return from_gymnasium(
        gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (2, 2), np.uint8),
                "pair": gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), gym.spaces.Text(5))),
                "md": gym.spaces.MultiDiscrete([2, 3]),
            }
        )
    )


def good_leaves(spec: spaces_pb.SpaceSpec, n: int = 2) -> list[bytes]:
    space = to_gymnasium(spec)
    space.seed(0)
    return list(encode_batch(spec, [space.sample() for _ in range(n)]).leaves)


# ----------------------------------------------------------------------------- decode


def test_wrong_leaf_count(nested: spaces_pb.SpaceSpec) -> None:
    leaves = good_leaves(nested)
    with raises("$", r"leaf count mismatch: got 3 leaves, expected 4"):
        decode_batch(nested, SV(leaves=leaves[:3]), 2)
    with raises("$", r"got 5 leaves, expected 4"):
        decode_stacked(nested, SV(leaves=[*leaves, b""]), 2)


def test_wrong_slab_size(nested: spaces_pb.SpaceSpec) -> None:
    leaves = good_leaves(nested)  # wire order: image, md, pair[0], pair[1]
    leaves[0] = leaves[0][:-1]
    with raises("$.image", r"length mismatch: slab: got 7 bytes, expected 2 lanes \* 4"):
        decode_batch(nested, SV(leaves=leaves), 2)


def test_slab_size_checked_against_n_not_divided(nested: spaces_pb.SpaceSpec) -> None:
    # Two lanes of bytes decoded as three lanes: N comes from the caller, never from division.
    leaves = good_leaves(nested)
    with raises("$.image", r"got 8 bytes, expected 3 lanes \* 4"):
        decode_batch(nested, SV(leaves=leaves), 3)


def test_discrete_slab_size_one_lane() -> None:
    spec = from_gymnasium(gym.spaces.Discrete(2))
    with raises("$", r"length mismatch: slab: got 4 bytes, expected 1 lanes \* 8"):
        decode(spec, SV(leaves=[bytes(4)]))


def text_spec() -> spaces_pb.SpaceSpec:
    return from_gymnasium(gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Text(8))))


def test_truncated_text_header() -> None:
    spec = text_spec()
    with raises("$[1]", r"length mismatch: text slab header truncated"):
        decode(spec, SV(leaves=[bytes(8), b"hi"]))  # raw UTF-8 without the header
    header_short = (2).to_bytes(8, "little") + (1).to_bytes(8, "little")
    with raises("$[1]", r"text slab header truncated \(got 16 bytes, expected at least 24"):
        decode_batch(spec, SV(leaves=[bytes(16), header_short]), 2)


def test_text_count_differs_from_lanes() -> None:
    spec = text_spec()
    slab = (2).to_bytes(8, "little") + (1).to_bytes(8, "little") * 2 + b"ab"
    with raises("$[1]", r"header says 2 lanes, expected 1"):
        decode(spec, SV(leaves=[bytes(8), slab]))


def test_text_body_length_mismatch() -> None:
    spec = text_spec()
    slab = (1).to_bytes(8, "little") + (3).to_bytes(8, "little") + b"ab"
    with raises("$[1]", r"text bodies: got 2 bytes, header lengths \[3\] need 3"):
        decode(spec, SV(leaves=[bytes(8), slab]))
    extra = (1).to_bytes(8, "little") + (1).to_bytes(8, "little") + b"ab"
    with raises("$[1]", r"text bodies: got 2 bytes"):
        decode(spec, SV(leaves=[bytes(8), extra]))
    huge = (1).to_bytes(8, "little") + (2**64 - 1).to_bytes(8, "little") + b"ab"
    with raises("$[1]", r"text bodies"):
        decode(spec, SV(leaves=[bytes(8), huge]))


def test_text_bad_utf8() -> None:
    spec = text_spec()
    body = b"ok" + b"\xff\xfe"
    slab = (2).to_bytes(8, "little") + (2).to_bytes(8, "little") * 2 + body
    with raises("$[1]", r"lane 1: invalid UTF-8 in text body at byte 0"):
        decode_batch(spec, SV(leaves=[bytes(16), slab]), 2)


def test_discrete_out_of_range_on_decode(nested: spaces_pb.SpaceSpec) -> None:
    spec = from_gymnasium(gym.spaces.Discrete(3, start=1))
    with raises("$", r"lane 0: value 0 not in range \[1, 4\)"):
        decode(spec, SV(leaves=[bytes(8)]))
    leaves = good_leaves(nested)
    leaves[2] = (1).to_bytes(8, "little") + (9).to_bytes(8, "little")
    with raises(r"$.pair[0]", r"lane 1: value 9 not in range \[1, 4\)"):
        decode_stacked(nested, SV(leaves=leaves), 2)
    # Many lanes (numpy path) name the first bad lane too.
    many = np.ones(40, np.int64)
    many[17] = -5
    with raises("$", r"lane 17: value -5 not in range \[1, 4\)"):
        decode_batch(spec, SV(leaves=[many.tobytes()]), 40)


def test_multi_discrete_out_of_range_on_decode(nested: spaces_pb.SpaceSpec) -> None:
    leaves = good_leaves(nested)
    leaves[1] = np.array([[1, 2], [0, 3]], np.int64).tobytes()
    with raises("$.md", r"lane 1: element 1 value 3 not in range \[0, 3\)"):
        decode_batch(nested, SV(leaves=leaves), 2)


def test_bad_value_and_n_types(nested: spaces_pb.SpaceSpec) -> None:
    with raises("$", r"expected a SpaceValue, got bytes"):
        decode_batch(nested, b"", 1)  # type: ignore[arg-type]
    with raises("$", r"lane count must be a non-negative int, got -1"):
        decode_batch(nested, SV(leaves=good_leaves(nested)), -1)


# ----------------------------------------------------------------------------- encode


@pytest.mark.parametrize(
    "dtype,value,pattern",
    [
        (np.uint8, [256, 0], r"lane 0: value 256 out of range for uint8 \[0, 255\]"),
        (np.int8, [0, -129], r"value -129 out of range for int8 \[-128, 127\]"),
        (np.uint16, [-1, 0], r"value -1 out of range for uint16"),
        (np.int32, [np.nan, 0], r"out of range for int32 .* or not an integer"),
        (np.int64, [2**63, 0], r"value 9223372036854775808 out of range for int64"),
        (np.uint8, [1.5, 0], r"out of range for uint8 .* or not an integer"),
        (np.bool_, [2, 0], r"lane 0: value out of range for bool"),
    ],
)
def test_out_of_dtype_range_on_encode(dtype: type, value: list[Any], pattern: str) -> None:
    spec = from_gymnasium(gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,), dtype)}))
    with raises("$.x", pattern):
        encode(spec, {"x": value})


def test_discrete_out_of_dtype_range_on_encode() -> None:
    spec = from_gymnasium(gym.spaces.Tuple((gym.spaces.Discrete(2),)))
    with raises("$[0]", r"out of range for int64"):
        encode(spec, (2**64,))
    i8 = spaces_pb.SpaceSpec(dtype=DT.INT8, discrete=spaces_pb.DiscreteSpec(n=2))
    with raises("$", r"lane 1: value 300 out of range for int8"):
        encode_batch(i8, [1, 300])
    with raises("$", r"expected integers for int64"):
        encode(from_gymnasium(gym.spaces.Discrete(2)), "one")


def test_encode_shape_and_lane_mismatches(nested: spaces_pb.SpaceSpec) -> None:
    box = from_gymnasium(gym.spaces.Box(0, 1, (3,), np.float32))
    with raises("$", r"shape mismatch: got per-lane shape \(2,\), expected \(3,\)"):
        encode(box, [0.0, 1.0])
    with raises("$", r"lane count mismatch: got 2 lanes, expected 3"):
        encode_stacked(box, np.zeros((2, 3), np.float32), 3)
    with raises("$", r"value is not an array of uniform shape"):
        encode_batch(box, [np.zeros(3), np.zeros(2)])
    with raises("$", r"expected numbers for float32, got dtype <U"):
        encode(box, ["a", "b", "c"])
    with raises("$.pair[1]", r"lane 0: expected str, got int"):
        encode(nested, {"image": np.zeros((2, 2), np.uint8), "md": [0, 0], "pair": (1, 5)})
    with raises("$.pair[1]", r"lane count mismatch: got 1 lanes, expected 2"):
        encode_stacked(
            nested,
            {
                "image": np.zeros((2, 2, 2), np.uint8),
                "md": np.zeros((2, 2)),
                "pair": ([1, 1], ["a"]),
            },
            2,
        )


def test_encode_dict_and_tuple_structure(nested: spaces_pb.SpaceSpec) -> None:
    with raises("$", r"lane 0: dict keys mismatch: missing \['md'\], unexpected \['zz'\]"):
        encode(nested, {"image": np.zeros((2, 2)), "pair": (1, "a"), "zz": 1})
    with raises("$", r"lane 1: expected a dict, got list"):
        encode_batch(nested, [{"image": 0, "md": 0, "pair": 0}, []])
    with raises("$.pair", r"lane 0: tuple length mismatch: got 1 items, expected 2"):
        encode(nested, {"image": np.zeros((2, 2)), "md": [0, 0], "pair": (1,)})
    with raises("$.pair", r"expected a tuple, got str"):
        encode(nested, {"image": np.zeros((2, 2)), "md": [0, 0], "pair": "ab"})
    with raises("$", r"dict keys mismatch: missing \['pair'\]"):
        encode_stacked(nested, {"image": np.zeros((1, 2, 2)), "md": np.zeros((1, 2))}, 1)
    with raises("$", r"expected a list of per-lane values, got dict"):
        encode_batch(nested, {"image": 1})  # type: ignore[arg-type]


def test_encode_text_not_utf8_encodable() -> None:
    spec = from_gymnasium(gym.spaces.Text(4))
    with raises("$", r"lane 0: text is not UTF-8 encodable"):
        encode(spec, "\ud800")


# ----------------------------------------------------------------------------- specs


def box_spec(**kw: Any) -> spaces_pb.SpaceSpec:
    base: dict[str, Any] = {
        "shape": [2],
        "dtype": DT.FLOAT32,
        "box": spaces_pb.BoxSpec(unbounded=True),
    }
    base.update(kw)
    return spaces_pb.SpaceSpec(**base)


def test_unknown_dtype() -> None:
    spec = spaces_pb.SpaceSpec.parse(bytes.fromhex("0a0102 1063 5202 0801"))  # dtype 99
    with raises("$", r"unsupported dtype: unknown DataType 99"):
        encode(spec, [0, 0])
    with raises("$", r"unsupported dtype: unknown DataType 99"):
        to_gymnasium(spec)
    with raises("$", r"unsupported dtype: DATA_TYPE_UNSPECIFIED"):
        decode(box_spec(dtype=DT.UNSPECIFIED), SV(leaves=[b""]))
    with raises("$", r"\[Discrete\] dtype must be an integer type, got float32"):
        encode(spaces_pb.SpaceSpec(dtype=DT.FLOAT32, discrete=spaces_pb.DiscreteSpec(n=2)), 1)


def test_unknown_spec_kind() -> None:
    # Field 15 is no known arm: the parsed spec has no kind at all.
    spec = spaces_pb.SpaceSpec.parse(bytes.fromhex("0a0102 100b 7a00"))
    with raises("$", r"unknown or missing SpaceSpec kind"):
        decode(spec, SV(leaves=[]))
    nested = spaces_pb.SpaceSpec(
        dict=spaces_pb.DictSpec(keys=["a", "b"], spaces=[box_spec(), spaces_pb.SpaceSpec()])
    )
    with raises("$.b", r"unknown or missing SpaceSpec kind"):
        to_gymnasium(nested)
    with raises("$.b", r"unknown or missing SpaceSpec kind"):
        encode(nested, {"a": [0, 0], "b": 1})


def test_bad_bound_byte_lengths() -> None:
    uni = box_spec(
        box=spaces_pb.BoxSpec(uniform=spaces_pb.UniformBounds(low=bytes(4), high=bytes(8)))
    )
    with raises("$", r"uniform high bound: got 8 bytes, expected 1 \* 4 \(float32\)"):
        to_gymnasium(uni)
    with raises("$", r"uniform high bound"):
        encode(uni, [0, 0])
    ew = box_spec(
        box=spaces_pb.BoxSpec(elementwise=spaces_pb.ElementwiseBounds(low=bytes(4), high=bytes(8)))
    )
    with raises("$", r"elementwise low bound: got 4 bytes, expected 2 \* 4 \(float32\)"):
        to_gymnasium(ew)


def test_scalar_box_rejected() -> None:
    with raises("$", r"^\[Box\] shape must be set \(rank >= 1\)$"):
        from_gymnasium(gym.spaces.Box(0, 1, (), np.float32))
    with raises("$.obs", r"\[Box\] shape must be set \(rank >= 1\)"):
        from_gymnasium(gym.spaces.Dict({"obs": gym.spaces.Box(0, 1, (), np.float32)}))
    with raises("$", r"\[Box\] shape must be set"):
        to_gymnasium(box_spec(shape=[]))
    with raises("$", r"\[Box\] shape must be set"):
        encode(box_spec(shape=[]), 1.0)


def test_malformed_specs() -> None:
    with raises("$", r"negative dimension in shape \[-1\]"):
        to_gymnasium(box_spec(shape=[-1]))
    with raises("$", r"\[Dict\] 2 keys but 1 spaces"):
        to_gymnasium(
            spaces_pb.SpaceSpec(dict=spaces_pb.DictSpec(keys=["a", "b"], spaces=[box_spec()]))
        )
    dup = spaces_pb.SpaceSpec(
        dict=spaces_pb.DictSpec(keys=["a", "a"], spaces=[box_spec(), box_spec()])
    )
    with raises("$", r"\[Dict\] duplicate keys"):
        encode(dup, {"a": [0, 0]})
    md = spaces_pb.SpaceSpec(
        shape=[2, 2], dtype=DT.INT64, multi_discrete=spaces_pb.MultiDiscreteSpec(nvec=[2, 3])
    )
    with raises("$", r"\[MultiDiscrete\] nvec has 2 entries, shape \[2, 2\] needs 4"):
        to_gymnasium(md)
    with raises("$", r"\[MultiDiscrete\] nvec has 2 entries"):
        decode(md, SV(leaves=[bytes(32)]))
    with raises("$", r"\[Discrete\] n must be > 0, got 0"):
        to_gymnasium(spaces_pb.SpaceSpec(dtype=DT.INT64, discrete=spaces_pb.DiscreteSpec(n=0)))
    with raises("$", r"expected a SpaceSpec, got dict"):
        encode({"box": 1}, 1)  # type: ignore[arg-type]


def test_unsupported_gymnasium_spaces() -> None:
    with raises("$.seq", r"unsupported space type Sequence"):
        from_gymnasium(gym.spaces.Dict({"seq": gym.spaces.Sequence(gym.spaces.Discrete(2))}))
    with raises("$[0]", r"\[Text\] min_length must be > 0"):
        from_gymnasium(gym.spaces.Tuple((gym.spaces.Text(4, min_length=0),)))
    with raises("$", r"dtype complex64 has no wire DataType|unsupported"):
        from_gymnasium(_ComplexBox())


class _ComplexBox(gym.spaces.Box):
    """A Box whose dtype has no wire DataType (gymnasium itself refuses complex Boxes)."""

    def __init__(self) -> None:
        super().__init__(0, 1, (2,), np.float32)
        self.dtype = np.dtype(np.complex64)  # type: ignore[misc]


def test_float_narrowing_overflow_on_encode() -> None:
    spec = from_gymnasium(gym.spaces.Dict({"h": gym.spaces.Box(-1, 1, (2,), np.float16)}))
    with raises("$.h", r"lane 0: value 1000000.0 out of range for float16"):
        encode(spec, {"h": [1e6, 0.0]})
    with raises("$.h", r"value 70000 out of range for float16"):
        encode(spec, {"h": np.array([0, 70000])})
    # Infinity itself is a float16 value, not an overflow.
    assert encode(spec, {"h": [np.inf, 0.5]}).leaves == [bytes.fromhex("007c 0038")]


def test_text_lane_list_must_not_be_a_string() -> None:
    spec = from_gymnasium(gym.spaces.Text(4))
    with raises("$", r"expected a list of 2 str \(one per lane\), got str"):
        encode_stacked(spec, "ab", 2)
    with raises("$", r"expected a list of per-lane values, got str"):
        encode_batch(spec, "ab")  # type: ignore[arg-type]
    with raises("$", r"expected a list of per-lane values, got ndarray"):
        encode_batch(spec, np.array("ab"))  # type: ignore[arg-type]


def test_text_spec_from_a_peer_needs_positive_min_length() -> None:
    from rlmesh_trio._protocol import spaces_pb as sp
    from rlmesh_trio.spaces import to_gymnasium

    zero = sp.SpaceSpec(dtype=sp.DataType.UINT8, text=sp.TextSpec(min_length=0, max_length=5))
    with pytest.raises(ProtocolError, match=r"\$: \[Text\] min_length must be > 0"):
        to_gymnasium(zero)
    inverted = sp.SpaceSpec(dtype=sp.DataType.UINT8, text=sp.TextSpec(min_length=4, max_length=2))
    with pytest.raises(ProtocolError, match="max_length 2 is below min_length 4"):
        to_gymnasium(inverted)


def test_check_batch_checks_framing_only() -> None:
    from rlmesh_trio.spaces import check_batch, encode_batch, from_gymnasium

    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1, 1, (3,), np.float32), "name": gym.spaces.Text(8)}
    )
    spec = from_gymnasium(space)
    good = encode_batch(spec, [space.sample(), space.sample()])
    check_batch(spec, good, 2)  # a well-framed batch passes
    name_leaf, pos_leaf = good.leaves  # wire order: keys sorted
    short = spaces_pb.SpaceValue(leaves=[name_leaf, pos_leaf[:-4]])
    with pytest.raises(ProtocolError, match=r"\$\.pos: length mismatch: slab: got 20 bytes"):
        check_batch(spec, short, 2)
    with pytest.raises(ProtocolError, match=r"\$: leaf count mismatch"):
        check_batch(spec, spaces_pb.SpaceValue(leaves=[pos_leaf]), 2)
    with pytest.raises(ProtocolError, match=r"\$\.pos: length mismatch: slab: got 24 bytes"):
        check_batch(spec, good, 3)
    text_spec = from_gymnasium(gym.spaces.Text(8))
    two = encode_batch(text_spec, ["ab", "cd"])
    with pytest.raises(ProtocolError, match=r"\$: text slab count mismatch"):
        check_batch(text_spec, two, 3)
    bad_utf8 = spaces_pb.SpaceValue(leaves=[two.leaves[0][:-1] + b"\xff"])
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        check_batch(text_spec, bad_utf8, 2)


def test_check_batch_leaves_value_ranges_to_the_decoder() -> None:
    from rlmesh_trio.spaces import check_batch, from_gymnasium

    spec = from_gymnasium(gym.spaces.Discrete(3))
    out_of_range = spaces_pb.SpaceValue(leaves=[(9).to_bytes(8, "little")])
    check_batch(spec, out_of_range, 1)
    with pytest.raises(ProtocolError, match="not in range"):
        decode_batch(spec, out_of_range, 1)
