"""The explicit timers: a deadline scope per call, or one watchdog per loop task, alike.

Both must fire at exactly ``start + limit`` on the run's clock and raise the
same ``OperationTimeout``; both must let calls that finish in time, and an
enclosing cancellation, through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext

import pytest
import trio
import trio.testing

from rlmesh_trio._errors import OperationTimeout
from rlmesh_trio.runtime._timer import DeadlineTimer, OperationTimer, WatchdogTimer

Guard = Callable[[], AbstractAsyncContextManager[None]]
MakeTimer = Callable[[], tuple[OperationTimer, Guard]]


def _deadline() -> tuple[OperationTimer, Guard]:
    return DeadlineTimer("r", trio.current_time), nullcontext  # no guard needed


def _watchdog() -> tuple[OperationTimer, Guard]:
    timer = WatchdogTimer("r", trio.current_time)
    return timer, timer.guard


TIMERS = pytest.mark.parametrize("make", [_deadline, _watchdog], ids=["deadline", "watchdog"])


async def _takes(seconds: float) -> str:
    await trio.sleep(seconds)
    return "done"


@TIMERS
async def test_a_late_call_times_out_at_its_limit_naming_the_operation(
    make: MakeTimer,
    autojump_clock: trio.testing.MockClock,
) -> None:
    timer, guard = make()
    started = trio.current_time()
    with pytest.raises(OperationTimeout) as caught:
        async with guard():
            await timer.timed("env", "env.step", 7, 2.0, _takes(1.0))
            await timer.timed("env", "env.step", 8, 2.0, _takes(5.0))
    assert trio.current_time() - started == pytest.approx(3.0)
    error = caught.value
    assert (error.route_id, error.component_id, error.operation, error.step) == (
        "r",
        "env",
        "env.step",
        8,
    )
    assert error.timeout == 2.0


@TIMERS
async def test_calls_in_time_return_their_value(
    make: MakeTimer,
    autojump_clock: trio.testing.MockClock,
) -> None:
    timer, guard = make()
    async with guard():
        for _ in range(20):
            assert await timer.timed("model", "model.predict", 0, 1.0, _takes(0.9)) == "done"
            await trio.sleep(5.0)  # time between calls is never counted


@TIMERS
async def test_an_enclosing_cancellation_passes_through(
    make: MakeTimer,
    autojump_clock: trio.testing.MockClock,
) -> None:
    timer, guard = make()
    with trio.move_on_after(1.0) as outer:
        async with guard():
            await timer.timed("env", "env.reset", 0, 10.0, _takes(5.0))
    assert outer.cancelled_caught


@TIMERS
async def test_the_with_form_times_out_at_its_limit_like_timed(
    make: MakeTimer,
    autojump_clock: trio.testing.MockClock,
) -> None:
    timer, guard = make()
    started = trio.current_time()
    with pytest.raises(OperationTimeout) as caught:
        async with guard():
            with timer.limit("env", "env.step", 7, 2.0):
                assert await _takes(1.0) == "done"
            await trio.sleep(5.0)  # time between limits is never counted
            with timer.limit("env", "env.step", 8, 2.0):
                await _takes(5.0)
    assert trio.current_time() - started == pytest.approx(8.0)
    error = caught.value
    assert (error.route_id, error.operation, error.step, error.timeout) == (
        "r",
        "env.step",
        8,
        2.0,
    )


@TIMERS
async def test_the_with_form_lets_an_enclosing_cancellation_and_errors_through(
    make: MakeTimer,
    autojump_clock: trio.testing.MockClock,
) -> None:
    timer, guard = make()
    with trio.move_on_after(1.0) as outer:
        async with guard():
            with timer.limit("env", "env.reset", 0, 10.0):
                await _takes(5.0)
    assert outer.cancelled_caught
    timer, guard = make()  # a watchdog guards one loop
    with pytest.raises(ValueError, match="boom"):
        async with guard():
            with timer.limit("model", "model.predict", 0, 10.0):
                raise ValueError("boom")
