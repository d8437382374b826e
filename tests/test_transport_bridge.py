"""The Trio <-> asyncio bridge: cancellation both ways, exceptions unwrapped, slots."""

from __future__ import annotations

import asyncio

import pytest
import trio
import trio.testing

from . import _asyncio_bridge as bridge


async def test_trio_timeout_cancels_the_asyncio_side() -> None:
    seen: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async with bridge.asyncio_loop():
        with trio.move_on_after(0.05) as scope:
            await bridge.call(slow)
        assert scope.cancelled_caught
        # The asyncio side runs in Trio tasks: once all are blocked, it has handled the cancel.
        await trio.testing.wait_all_tasks_blocked()
    assert seen == ["cancelled"]


async def test_asyncio_side_results_and_errors_cross_back() -> None:
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    async def boom() -> None:
        raise KeyError("asyncio side")

    async with bridge.asyncio_loop():
        assert await bridge.call(add, 2, 3) == 5
        with pytest.raises(KeyError, match="asyncio side"):
            await bridge.call(boom)


async def test_loop_block_reraises_the_body_exception_unwrapped() -> None:
    with pytest.raises(ValueError, match="plain"):
        async with bridge.asyncio_loop():
            raise ValueError("plain")


async def test_nested_loop_blocks_reuse_the_outer_loop() -> None:
    async with bridge.asyncio_loop():
        assert bridge.in_loop()
        async with bridge.asyncio_loop():
            assert bridge.in_loop()
    assert not bridge.in_loop()
    with pytest.raises(RuntimeError, match="asyncio_loop"):
        bridge.require_loop("this test")
