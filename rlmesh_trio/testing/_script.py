"""The call plumbing both scripted fakes share: record, delay, and injected failures."""

from __future__ import annotations

from typing import Protocol

import trio

__all__ = ["enter_call"]


class _Scripted(Protocol):
    record: bool
    calls: list[str]
    counts: dict[str, int]
    delays: dict[str, float]
    fail_at: dict[str, int]
    failure: str


async def enter_call(fake: _Scripted, op: str) -> tuple[int, bool]:
    """Record ``op``, apply its delay (a checkpoint at least), and say if this call must fail.

    Returns ``(count, fail)``: the 1-based count of ``op`` calls and whether the
    fake's ``fail_at`` picks this one. With ``failure="hang"`` a picked call
    never returns (until cancelled) instead.
    """
    if fake.record:
        fake.calls.append(op)
    count = fake.counts[op] = fake.counts.get(op, 0) + 1
    delay = fake.delays.get(op, 0.0)
    if delay:
        await trio.sleep(delay)
    else:
        await trio.lowlevel.checkpoint()
    fail = fake.fail_at.get(op) == count
    if fail and fake.failure == "hang":
        await trio.sleep_forever()
    return count, fail
