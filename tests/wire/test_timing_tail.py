"""``put_timing_tail``: the tail of a hand-written Join reply, the bytes betterproto2 writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlmesh_trio._wire import env_pb, model_pb
from rlmesh_trio.wire._pb import ENV_COUNTERS, VARINT, key
from rlmesh_trio.wire._tail import put_timing_tail

u64 = st.integers(0, 2**64 - 1)
PHASES = ("decode_ns", "user_ns", "encode_ns")


@given(total=st.integers(1, 2**64 - 1), counters=st.tuples(*[u64] * len(ENV_COUNTERS)))
def test_env_tail_is_betterproto2s(total: int, counters: tuple[int, ...]) -> None:
    out = bytearray()
    tags = [key(env_pb.JoinResponse, name, VARINT) for name in ENV_COUNTERS]
    put_timing_tail(
        out, key(env_pb.JoinResponse, "endpoint_total_ns", VARINT), total, tags, counters
    )
    counts: dict[str, Any] = dict(zip(ENV_COUNTERS, counters, strict=True))
    built = env_pb.JoinResponse(endpoint_total_ns=total, **counts)
    assert bytes(out) == bytes(built)


@given(total=st.integers(1, 2**64 - 1), phases=st.tuples(u64, u64, u64))
def test_model_tail_is_betterproto2s(total: int, phases: tuple[int, int, int]) -> None:
    out = bytearray()
    tags = [key(model_pb.JoinResponse, name, VARINT) for name in PHASES]
    put_timing_tail(
        out, key(model_pb.JoinResponse, "endpoint_total_ns", VARINT), total, tags, phases
    )
    counts: dict[str, Any] = dict(zip(PHASES, phases, strict=True))
    built = model_pb.JoinResponse(endpoint_total_ns=total, **counts)
    assert bytes(out) == bytes(built)


def test_tags_and_counters_must_pair() -> None:
    with pytest.raises(ValueError):
        put_timing_tail(bytearray(), b"\x08", 1, [b"\x10"], [1, 2])
