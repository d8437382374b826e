"""``put_timing_tail``: the tail of a hand-written Join reply, the bytes betterproto2 writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlmesh_trio._protocol import env_pb, model_pb
from rlmesh_trio._wire._pb import ENV_COUNTERS, VARINT, key
from rlmesh_trio._wire._tail import put_timing_tail

#: The phase counters of a model JoinResponse, in the order its writer passes them.
MODEL_PHASES = ("decode_ns", "user_ns", "encode_ns")


@pytest.mark.parametrize(
    ("message", "names"),
    [(env_pb.JoinResponse, ENV_COUNTERS), (model_pb.JoinResponse, MODEL_PHASES)],
    ids=["env", "model"],
)
@given(data=st.data())
def test_tail_is_betterproto2s(message: Any, names: tuple[str, ...], data: Any) -> None:
    total = data.draw(st.integers(1, 2**64 - 1))
    counters = data.draw(st.tuples(*[st.integers(0, 2**64 - 1)] * len(names)))
    out = bytearray()
    tags = [key(message, name, VARINT) for name in names]
    put_timing_tail(out, key(message, "endpoint_total_ns", VARINT), total, tags, counters)
    counts: dict[str, Any] = dict(zip(names, counters, strict=True))
    assert bytes(out) == bytes(message(endpoint_total_ns=total, **counts))


def test_tags_and_counters_must_pair() -> None:
    with pytest.raises(ValueError):
        put_timing_tail(bytearray(), b"\x08", 1, [b"\x10"], [1, 2])
