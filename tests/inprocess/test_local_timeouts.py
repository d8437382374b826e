"""In-process policies and envs keep their timeouts (issue 12 item 3) and run cheap calls
inline (item 26): threaded calls are cut off AT the deadline, inline calls fail when they
return late, async policies time out at their await."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import pytest
import trio
import trio.testing

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.runtime._placement import (
    MAX_DEMOTIONS,
    PROBE_CALLS,
    CallPlacement,
    threads_in_flight,
)

FAST = rt.Limits(model_predict_timeout=0.2)


def only_outcome(report: rt.RunReport) -> rt.RouteOutcome:
    (outcome,) = report.routes
    return outcome


def assert_predict_timeout(outcome: rt.RouteOutcome, timeout: float) -> None:
    error = outcome.error
    assert isinstance(error, rt.OperationTimeout), repr(error)
    assert error.operation == "model.predict"
    assert error.timeout == timeout
    assert outcome.status == "failed"


class Blocking:
    """A sync policy that blocks its thread on an event until the test lets it go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, obs: Any) -> int:
        self.entered.set()
        self.release.wait()
        return 0


async def test_a_threaded_policy_that_hangs_times_out_at_the_deadline() -> None:
    policy = Blocking()
    model = rt.LocalModel(policy, threaded=True)
    route = rt.Route(env=gym.make("CartPole-v1"), model=model, seeds=[0], limits=FAST)
    try:
        # The policy is still blocked when the report comes back: the timeout did not
        # wait for the call to return.
        report = await rt.run_routes([route], on_failure="isolate", handle_sigint=False)
        assert not policy.release.is_set() and policy.entered.is_set()
    finally:
        policy.release.set()
    assert_predict_timeout(only_outcome(report), 0.2)


async def test_a_hung_policy_does_not_stall_other_routes() -> None:
    policy = Blocking()

    class ReleaseWhenOkEnds(rt.RuntimeHooks):
        # The hung policy is let go only once the healthy route has ended: if the hang
        # stalled the Trio thread, that would never happen.
        async def session_ended(self, event: Any) -> None:
            if event.route_id == "ok":
                policy.release.set()

    hung = rt.Route(
        env=gym.make("CartPole-v1"),
        model=rt.LocalModel(policy, threaded=True),
        seeds=[0],
        route_id="hung",
    )
    fine = rt.Route(env=gym.make("CartPole-v1"), model=cartpole_policy, seeds=[1, 2], route_id="ok")
    report = await rt.run_routes([hung, fine], hooks=ReleaseWhenOkEnds(), handle_sigint=False)
    outcomes = {o.route_id: o for o in report.routes}
    assert outcomes["ok"].status == "completed" and outcomes["ok"].total_episodes == 2
    assert outcomes["hung"].status == "completed"


@pytest.mark.parametrize("threaded", [False, None])  # None: the default starts inline
async def test_an_inline_policy_that_returns_late_fails_with_the_timeout(
    mock_clock: trio.testing.MockClock, threaded: bool | None
) -> None:
    def slow(obs: Any) -> int:
        mock_clock.jump(1.0)  # "takes 1 s" on the run's clock, without yielding
        return 0

    model = rt.LocalModel(slow, threaded=threaded)
    env = rt.LocalEnv(gym.make("CartPole-v1"), threaded=False)
    route = rt.Route(env=env, model=model, seeds=[0], limits=FAST)
    report = await rt.run_routes([route], on_failure="isolate", handle_sigint=False)
    outcome = only_outcome(report)
    assert_predict_timeout(outcome, 0.2)
    assert outcome.total_steps == 0  # the late action was never applied


async def test_an_async_policy_times_out_at_its_await() -> None:
    never = trio.Event()

    async def stuck(obs: Any) -> int:
        await never.wait()
        return 0

    route = rt.Route(env=gym.make("CartPole-v1"), model=stuck, seeds=[0], limits=FAST)
    report = await rt.run_routes([route], on_failure="isolate", handle_sigint=False)
    assert_predict_timeout(only_outcome(report), 0.2)


async def test_an_inline_env_step_that_returns_late_fails_with_the_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    class SlowStep(gym.Wrapper[Any, Any, Any, Any]):
        def step(self, action: Any) -> Any:
            mock_clock.jump(5.0)
            return super().step(action)

    env = rt.LocalEnv(SlowStep(gym.make("CartPole-v1")), threaded=False)
    limits = rt.Limits(env_step_timeout=1.0)
    route = rt.Route(env=env, model=cartpole_policy, seeds=[0], limits=limits)
    report = await rt.run_routes([route], on_failure="isolate", handle_sigint=False)
    error = only_outcome(report).error
    assert isinstance(error, rt.OperationTimeout) and error.operation == "env.step"


async def test_a_threaded_env_step_that_hangs_times_out_at_the_deadline() -> None:
    release = threading.Event()

    class Hangs(gym.Wrapper[Any, Any, Any, Any]):
        def step(self, action: Any) -> Any:
            release.wait()
            return super().step(action)

    env = rt.LocalEnv(Hangs(gym.make("CartPole-v1")), threaded=True)
    route = rt.Route(
        env=env, model=cartpole_policy, seeds=[0], limits=rt.Limits(env_step_timeout=0.2)
    )
    try:
        report = await rt.run_routes([route], on_failure="isolate", handle_sigint=False)
        assert not release.is_set()
    finally:
        release.set()
    error = only_outcome(report).error
    assert isinstance(error, rt.OperationTimeout) and error.operation == "env.step"


# -- adaptive placement ------------------------------------------------------------------


async def test_cheap_calls_go_inline_after_the_probes_and_a_slow_one_goes_back() -> None:
    placement = CallPlacement(inline_limit=10.0)
    seen: list[bool] = []

    def where() -> bool:
        return threading.current_thread() is threading.main_thread()

    for _ in range(PROBE_CALLS + 2):
        seen.append(await placement.run(where))
    assert seen == [False] * PROBE_CALLS + [True, True]
    placement.inline_limit = 0.0  # every call is now "slow"
    assert await placement.run(where) is True  # one slow call may have been preempted
    assert placement.inline
    assert await placement.run(where) is True  # the second in a row sends it to threads
    assert not placement.inline
    assert await placement.run(where) is False


async def test_slow_probes_keep_an_endpoint_threaded() -> None:
    placement = CallPlacement(inline_limit=0.0)
    for _ in range(PROBE_CALLS * 2):
        await placement.run(lambda: None)
    assert not placement.inline


async def test_repeatedly_slow_inline_calls_leave_an_endpoint_threaded_for_good() -> None:
    placement = CallPlacement(inline_limit=10.0)
    for _ in range(MAX_DEMOTIONS):
        for _ in range(PROBE_CALLS):
            await placement.run(lambda: None)
        assert placement.inline
        placement.inline_limit = 0.0
        await placement.run(lambda: None)
        await placement.run(lambda: None)  # slow twice: back to threads
        assert not placement.inline
        placement.inline_limit = 10.0
    for _ in range(PROBE_CALLS * 2):
        await placement.run(lambda: None)
    assert not placement.inline


async def test_a_model_placement_starts_inline_and_slow_calls_move_it_to_threads() -> None:
    model = rt.LocalModel(cartpole_policy)
    assert model.placement.inline and model.placement.adaptive
    placement = CallPlacement(start_inline=True, inline_limit=0.0)
    await placement.run(lambda: None)
    await placement.run(lambda: None)
    assert not placement.inline  # two slow calls in a row: threaded probes now


async def test_fixed_placements_never_move() -> None:
    inline, threaded = CallPlacement(False, inline_limit=0.0), CallPlacement(True)
    for _ in range(PROBE_CALLS + 1):
        assert await inline.run(threading.current_thread) is threading.main_thread()
        assert await threaded.run(threading.current_thread) is not threading.main_thread()
    assert inline.inline and not threaded.inline
    with pytest.raises(ValueError, match="inline_limit"):
        CallPlacement(inline_limit=-1)


async def test_an_in_process_cartpole_route_goes_inline_and_matches_gymnasium() -> None:
    env = rt.LocalEnv(gym.make("CartPole-v1"))
    model = rt.LocalModel(cartpole_policy)
    route = rt.Route(env=env, model=model, seeds=[3, 4])
    report = await rt.run_routes([route], handle_sigint=False)
    assert env.placement.inline and model.placement.inline
    reference = gym.make("CartPole-v1")
    for episode, seed in zip(report.episodes, (3, 4), strict=True):
        obs, _ = reference.reset(seed=seed)
        steps = 0
        while True:
            obs, _, terminated, truncated, _ = reference.step(cartpole_policy(obs))
            steps += 1
            if terminated or truncated:
                break
        assert episode.steps == steps


async def test_inline_routes_take_turns() -> None:
    # Two routes whose env and policy both run inline still interleave (the env's
    # time slice yields): neither finishes all its episodes before the other starts.
    order: list[str] = []

    def tagged(tag: str) -> Any:
        def act(obs: Any) -> int:
            if not order or order[-1] != tag:
                order.append(tag)
            return cartpole_policy(obs)

        return act

    routes = [
        rt.Route(
            env=rt.LocalEnv(gym.make("CartPole-v1"), threaded=False),
            model=rt.LocalModel(tagged(tag), threaded=False),
            seeds=list(range(20)),
            route_id=tag,
        )
        for tag in ("a", "b")
    ]
    await rt.run_routes(routes, handle_sigint=False)
    assert len(order) > 2


async def test_threaded_calls_in_flight_are_counted_for_the_gil_handoff() -> None:
    # Inline turns hand the GIL over only while a worker-thread call is out; the count
    # must come back to zero, also for a call abandoned at its deadline.
    placement = CallPlacement(threaded=True)
    entered, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def blocks() -> None:
        entered.set()
        release.wait()

    assert threads_in_flight() == 0
    assert await placement.run(threads_in_flight) == 1  # read in the thread, while out
    async with trio.open_nursery() as nursery:
        nursery.start_soon(placement.run, blocks)
        await trio.to_thread.run_sync(entered.wait)
        seen.append(threads_in_flight())
        nursery.cancel_scope.cancel()  # abandons the blocked call
    release.set()
    assert seen == [1]
    assert threads_in_flight() == 0
