"""Golden bytes from the protocol notes (§6.4 worked examples and §3.7), checked byte for byte."""

from __future__ import annotations

import base64
from collections import OrderedDict

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio._protocol import core_pb, env_pb, spaces_pb
from rlmesh_trio.spaces import (
    decode,
    decode_batch,
    encode,
    encode_batch,
    from_gymnasium,
    meta_from_python,
    meta_to_python,
    to_gymnasium,
)

H = bytes.fromhex

CARTPOLE_LOW = H("9a9999c0 000080ff 5077d6be 000080ff")
CARTPOLE_HIGH = H("9a999940 0000807f 5077d63e 0000807f")


@pytest.fixture(scope="module")
def cartpole() -> gym.Env:
    env = gym.make("CartPole-v1")
    yield env
    env.close()


def test_cartpole_observation_spec_bytes(cartpole: gym.Env) -> None:
    spec = from_gymnasium(cartpole.observation_space)
    # shape [4] packed, dtype FLOAT32 (11), box{elementwise{low, high}}.
    elementwise = b"\x0a\x10" + CARTPOLE_LOW + b"\x12\x10" + CARTPOLE_HIGH
    box = b"\x1a" + bytes([len(elementwise)]) + elementwise
    expected = b"\x0a\x01\x04" + b"\x10\x0b" + b"\x52" + bytes([len(box)]) + box
    assert bytes(spec) == expected
    assert spec.box is not None and spec.box.elementwise is not None
    low = np.frombuffer(spec.box.elementwise.low, "<f4")
    np.testing.assert_allclose(low, [-4.8, -np.inf, -0.418879, -np.inf], rtol=1e-6)


def test_cartpole_action_spec_bytes(cartpole: gym.Env) -> None:
    spec = from_gymnasium(cartpole.action_space)
    assert spec.dtype == spaces_pb.DataType.INT64
    assert spec.discrete is not None and spec.discrete.n == 2 and spec.discrete.start == 0
    # dtype INT64 (9), discrete{n: 2}; start 0 is omitted.
    assert bytes(spec) == H("1009 5a02 0802")


def _declared_metadata(env: gym.Env) -> dict[str, object]:
    """The env class's own metadata. gymnasium 1.1's vector envs write ``autoreset_mode``
    into the metadata dict they share with the env class, so a vector env built by an
    earlier test would leak that key in here (the test would depend on test order)."""
    metadata = dict(env.unwrapped.metadata)
    if gym.__version__.startswith("1.1."):
        metadata.pop("autoreset_mode", None)
    return metadata


def test_cartpole_contract_metadata(cartpole: gym.Env) -> None:
    meta = meta_from_python(_declared_metadata(cartpole))
    assert isinstance(meta, spaces_pb.MetaMap)
    assert meta.entries["render_fps"].integer == 50
    modes = meta.entries["render_modes"].list
    assert modes is not None and [v.text for v in modes.items] == ["human", "rgb_array"]
    contract = env_pb.HandshakeResponse(
        env_contract=core_pb.EnvContract(
            spec=core_pb.EnvSpec(
                id="CartPole-v1",
                action_space=from_gymnasium(cartpole.action_space),
                observation_space=from_gymnasium(cartpole.observation_space),
                metadata=meta,
            ),
            num_envs=1,
            autoreset_mode=core_pb.AutoresetMode.DISABLED,
        )
    )
    back = env_pb.HandshakeResponse.parse(bytes(contract))
    assert back.env_contract is not None and back.env_contract.spec is not None
    assert meta_to_python(back.env_contract.spec.metadata) == {
        "render_modes": ["human", "rgb_array"],
        "render_fps": 50,
    }
    obs_spec = back.env_contract.spec.observation_space
    assert obs_spec is not None
    assert bytes(obs_spec) == bytes(from_gymnasium(cartpole.observation_space))
    assert to_gymnasium(obs_spec) == cartpole.observation_space


def test_cartpole_observation_leaf(cartpole: gym.Env) -> None:
    spec = from_gymnasium(cartpole.observation_space)
    leaf = base64.b64decode("1/RMPOOyIj171+E8OxzhvA==")
    obs = decode(spec, spaces_pb.SpaceValue(leaves=[leaf]))
    assert obs.dtype == np.float32 and obs.shape == (4,)
    np.testing.assert_allclose(obs, [0.0125, 0.0397, 0.0276, -0.0275], atol=5e-5)
    assert encode(spec, obs).leaves == [leaf]


def test_cartpole_action_leaf(cartpole: gym.Env) -> None:
    spec = from_gymnasium(cartpole.action_space)
    assert encode(spec, 1).leaves == [H("0100000000000000")]
    assert encode(spec, np.int64(1)).leaves == [H("0100000000000000")]
    assert decode(spec, spaces_pb.SpaceValue(leaves=[H("0100000000000000")])) == 1


def test_cartpole_batch_of_two(cartpole: gym.Env) -> None:
    obs_spec = from_gymnasium(cartpole.observation_space)
    act_spec = from_gymnasium(cartpole.action_space)
    a = np.array([0.0125, 0.0397, 0.0276, -0.0275], np.float32)
    b = np.array([1, 2, 3, 4], np.float32)
    obs = encode_batch(obs_spec, [a, b])
    assert obs.leaves == [a.tobytes() + b.tobytes()] and len(obs.leaves[0]) == 32
    act = encode_batch(act_spec, [0, 1])
    assert act.leaves == [bytes(8) + H("0100000000000000")]
    assert decode_batch(act_spec, act, 2) == [0, 1]
    lanes = decode_batch(obs_spec, obs, 2)
    np.testing.assert_array_equal(lanes[1], b)


DICT_ORDER = ["zpos", "img", "flags", "md", "d", "txt", "tup", "scalar", "ib"]
DICT_WIRE = ["d", "flags", "ib", "img", "md", "scalar", "tup", "txt", "zpos"]


def dict_example() -> tuple[gym.spaces.Dict, dict[str, object], list[bytes]]:
    space = gym.spaces.Dict(
        OrderedDict(
            [
                ("zpos", gym.spaces.Box(-1, 1, (3,), np.float32)),
                ("img", gym.spaces.Box(0, 255, (2, 2, 3), np.uint8)),
                ("flags", gym.spaces.MultiBinary(3)),
                ("md", gym.spaces.MultiDiscrete([3, 4])),
                ("d", gym.spaces.Discrete(5, start=-2)),
                ("txt", gym.spaces.Text(8, charset="abcdhé")),
                (
                    "tup",
                    gym.spaces.Tuple(
                        (gym.spaces.Discrete(2), gym.spaces.Box(-np.inf, np.inf, (2,), np.float64))
                    ),
                ),
                ("scalar", gym.spaces.Box(0, 1, (1,), np.float32)),
                ("ib", gym.spaces.Box(-10, 10, (2,), np.int32)),
            ]
        )
    )
    value = {
        "zpos": np.array([0.5, -0.5, 0.25], np.float32),
        "img": np.arange(12, dtype=np.uint8).reshape(2, 2, 3),
        "flags": np.array([1, 0, 1], np.int8),
        "md": np.array([2, 3]),
        "d": -1,
        "txt": "hé",
        "tup": (1, np.array([1.0, -2.0])),
        "scalar": np.array([0.75], np.float32),
        "ib": np.array([7, -3], np.int32),
    }
    leaves = [
        H("ffffffffffffffff"),
        H("010001"),
        H("07000000 fdffffff"),
        H("000102030405060708090a0b"),
        H("0200000000000000 0300000000000000"),
        H("0000403f"),
        H("0100000000000000"),
        H("000000000000f03f 00000000000000c0"),
        H("0100000000000000 0300000000000000 68c3a9"),
        H("0000003f 000000bf 0000803e"),
    ]
    return space, value, leaves


def test_dict_example_spec_and_leaves() -> None:
    space, value, leaves = dict_example()
    assert list(space.spaces) == DICT_ORDER
    spec = from_gymnasium(space)
    assert spec.dict is not None and list(spec.dict.keys) == DICT_WIRE
    assert spec.dtype == spaces_pb.DataType.UNSPECIFIED and list(spec.shape) == []
    d = spec.dict.spaces[0]
    assert d.discrete is not None and (d.discrete.n, d.discrete.start) == (5, -2)
    tup_f64 = spec.dict.spaces[6].tuple.spaces[1]  # type: ignore[union-attr]
    assert tup_f64.box is not None and tup_f64.box.unbounded is True
    encoded = encode(spec, value)
    assert encoded.leaves == leaves
    back = decode(spec, encoded)
    # Decoded in the gymnasium order the spec was built from.
    assert list(back) == DICT_ORDER
    assert space.contains(back)
    assert back["txt"] == "hé" and back["d"] == -1


def test_dict_example_decodes_from_parsed_spec_in_wire_order() -> None:
    space, _, leaves = dict_example()
    wire_spec = spaces_pb.SpaceSpec.parse(bytes(from_gymnasium(space)))
    back = decode(wire_spec, spaces_pb.SpaceValue(leaves=leaves))
    assert list(back) == DICT_WIRE
    assert space.contains(back)


def test_dict_decodes_unsorted_wire_keys() -> None:
    # 0.1.0 decoders follow wire order; so do we (keys ["z", "a"]).
    spec = spaces_pb.SpaceSpec(
        dict=spaces_pb.DictSpec(
            keys=["z", "a"],
            spaces=[
                from_gymnasium(gym.spaces.Discrete(3)),
                from_gymnasium(gym.spaces.Box(0, 1, (1,), np.float32)),
            ],
        )
    )
    value = spaces_pb.SpaceValue(leaves=[H("0200000000000000"), H("0000803f")])
    back = decode(spec, value)
    assert list(back) == ["z", "a"] and back["z"] == 2 and back["a"][0] == 1.0
    assert encode(spec, {"a": np.array([1.0], np.float32), "z": 2}).leaves == value.leaves


def test_text_batch_of_two() -> None:
    spec = from_gymnasium(gym.spaces.Text(10, charset="héloab"))
    expected = (
        H("0200000000000000")
        + H("0600000000000000")
        + H("0200000000000000")
        + H("68c3a96c6c6f6162")
    )
    value = encode_batch(spec, ["héllo", "ab"])
    assert value.leaves == [expected]
    assert decode_batch(spec, value, 2) == ["héllo", "ab"]


def test_tuple_example() -> None:
    space = gym.spaces.Tuple(
        (
            gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]])),
            gym.spaces.MultiBinary([2, 2]),
            gym.spaces.Box(0, 1, (2,), np.float16),
            gym.spaces.Box(-3, 3, (1,), np.int8),
            gym.spaces.Box(0, 1, (1,), bool),
        )
    )
    spec = from_gymnasium(space)
    assert spec.tuple is not None
    md, mb, f16, i8, b = spec.tuple.spaces
    assert i8.dtype == spaces_pb.DataType.INT8 and b.dtype == spaces_pb.DataType.BOOL
    assert md.multi_discrete is not None and list(md.multi_discrete.nvec) == [2, 3, 4, 5]
    assert list(md.shape) == [2, 2] and md.dtype == spaces_pb.DataType.INT64
    assert list(mb.shape) == [2, 2] and mb.dtype == spaces_pb.DataType.UINT8
    assert f16.box is not None and f16.box.uniform is not None
    assert (f16.box.uniform.low, f16.box.uniform.high) == (H("0000"), H("003c"))
    value = (
        np.array([[1, 2], [3, 4]]),
        np.array([[1, 0], [0, 1]], np.int8),
        np.array([0.5, 1.0], np.float16),
        np.array([-2], np.int8),
        np.array([True]),
    )
    leaves = encode(spec, value).leaves
    assert leaves == [
        H("0100000000000000 0200000000000000 0300000000000000 0400000000000000"),
        H("01000001"),
        H("0038003c"),
        H("fe"),
        H("01"),
    ]
    back = decode(spec, spaces_pb.SpaceValue(leaves=leaves))
    assert isinstance(back, tuple) and space.contains(back)


def test_bound_bytes_per_dtype() -> None:
    def uniform(space: gym.spaces.Box) -> tuple[bytes, bytes]:
        box = from_gymnasium(space).box
        assert box is not None and box.uniform is not None
        return box.uniform.low, box.uniform.high

    assert uniform(gym.spaces.Box(-1, 1, (2,), np.float32))[0] == H("000080bf")
    assert uniform(gym.spaces.Box(0, 1, (2,), np.float16))[1] == H("003c")
    assert uniform(gym.spaces.Box(-3, 3, (2,), np.int8))[0] == H("fd")
    assert uniform(gym.spaces.Box(0, 255, (2,), np.uint8))[1] == H("ff")
    assert uniform(gym.spaces.Box(0, 1, (2,), bool))[1] == H("01")
    box = from_gymnasium(gym.spaces.Box(np.array([0, -5]), np.array([3, 3]), dtype=np.int32)).box
    assert box is not None and box.elementwise is not None
    assert box.elementwise.low == H("00000000 fbffffff")


def test_meta_map_is_success_bytes() -> None:
    meta = meta_from_python({"is_success": True})
    assert bytes(meta) == H("0a 10 0a 0a 69 73 5f 73 75 63 63 65 73 73 12 02 20 01")
    assert meta_to_python(spaces_pb.MetaMap.parse(bytes(meta))) == {"is_success": True}


def test_full_join_request_bytes() -> None:
    action_spec = from_gymnasium(gym.spaces.Discrete(2))
    request = env_pb.JoinRequest(
        request_id="grpc-req-3",
        step=env_pb.StepRequest(
            action=encode(action_spec, 1), timeout_ms=300_000, episode_ids=["e1"]
        ),
    )
    assert bytes(request) == H(
        "12 14 0a 0a 0a 08 01 00 00 00 00 00 00 00 10 e0 a7 12 22 02 65 31"
        " 2a 0a 67 72 70 63 2d 72 65 71 2d 33"
    )


def test_empty_close_arm_is_sent() -> None:
    response = env_pb.JoinResponse(request_id="r1", close=env_pb.CloseEnvsResponse())
    assert bytes(response) == H("22 00 2a 02 72 31")
