"""A loop opened by one task and borrowed by a sibling outlives the borrower's use of it."""

from __future__ import annotations

import contextvars

import gymnasium
import trio
import trio.testing

import rlmesh_trio as rt

from . import _asyncio_bridge as _bridge


async def test_owner_waits_for_a_sibling_borrower() -> None:
    # Siblings sharing one context see each other's loop, as pytest-trio fixtures do.
    opened = trio.Event()
    borrowed = trio.Event()
    release = trio.Event()
    order: list[str] = []

    shared = contextvars.copy_context()

    async def adopt_shared_context() -> None:
        # What pytest-trio does for fixtures: every fixture task runs in one Context.
        trio.lowlevel.current_task().context = shared
        await trio.sleep(0)

    async def owner() -> None:
        await adopt_shared_context()
        async with _bridge.asyncio_loop():
            opened.set()
            await borrowed.wait()
        order.append("owner closed")

    async def borrower() -> None:
        await adopt_shared_context()
        await opened.wait()
        assert _bridge.in_loop()
        async with _bridge.asyncio_loop(), rt.serve_env(gymnasium.make("CartPole-v1")) as server:
            borrowed.set()
            await release.wait()
            report = await rt.run_routes(
                [rt.Route(env=server.address, model=lambda obs: 0, episodes=1)]
            )
            assert report.ok
        order.append("borrower done")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(owner)
        nursery.start_soon(borrower)
        await borrowed.wait()
        # The owner is leaving its block now; let it get as far as it can before release.
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert order == ["borrower done", "owner closed"]


async def test_an_already_cancelled_caller_never_enters_the_loop_block() -> None:
    # trio-asyncio forwards outer cancellation into its block from a helper task;
    # the bridge must not let a cancelled caller run the block in the meantime.
    entered = False
    with trio.CancelScope() as scope:
        scope.cancel()
        async with _bridge.asyncio_loop():
            entered = True
    assert scope.cancelled_caught
    assert not entered
