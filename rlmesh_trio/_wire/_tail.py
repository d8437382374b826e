"""The timing tail every hand-written Join reply ends with.

A JoinResponse carries ``endpoint_total_ns`` and then the endpoint's phase
counters. The env and model servers' fast reply writers both end with that
tail; proto3 leaves a zero counter unwritten, as betterproto2 does, so the
bytes match the ones the generic codec would give.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._pb import put_varint

__all__ = ["put_timing_tail"]


def put_timing_tail(
    out: bytearray, total_key: bytes, total_ns: int, tags: Iterable[bytes], counters: Iterable[int]
) -> None:
    """Append ``endpoint_total_ns`` and each non-zero counter after its tag.

    Raises:
        ValueError: ``tags`` and ``counters`` differ in length.
    """
    out += total_key
    put_varint(out, total_ns)
    for tag, value in zip(tags, counters, strict=True):
        if value:
            out += tag
            put_varint(out, value)
