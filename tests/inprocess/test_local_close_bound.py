"""Issue 24 item 4: an in-process env whose close() hangs cannot hold the run past its bound."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

BOUND = rt.Limits(service_close_timeout=0.2)


class HangingClose(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose close() blocks its thread until the test lets it go."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.entered, self.release = entered, release
        self.finished = threading.Event()

    def close(self) -> None:
        self.entered.set()
        self.release.wait()
        super().close()
        self.finished.set()


@pytest.fixture
def hanging() -> Iterator[tuple[threading.Event, threading.Event, list[HangingClose]]]:
    entered, release = threading.Event(), threading.Event()
    made: list[HangingClose] = []
    try:
        yield entered, release, made
    finally:
        release.set()  # let the abandoned close finish in its thread
        for env in made:
            assert env.finished.wait(10)


def _factory(state: tuple[threading.Event, threading.Event, list[HangingClose]]) -> Any:
    entered, release, made = state

    def make() -> HangingClose:
        env = HangingClose(entered, release)
        made.append(env)
        return env

    return make


def test_a_completed_route_ends_while_the_env_close_still_hangs(hanging: Any) -> None:
    entered, release, _ = hanging
    route = rt.Route(env=_factory(hanging), model=cartpole_policy, seeds=[0], limits=BOUND)
    report = rt.run([route])
    assert report.ok and report.total_episodes == 1
    assert entered.is_set() and not release.is_set()


def test_a_failed_route_ends_while_the_env_close_still_hangs(hanging: Any) -> None:
    entered, release, _ = hanging

    def broken(obs: Any) -> int:
        raise RuntimeError("policy bug")

    route = rt.Route(env=_factory(hanging), model=broken, seeds=[0], limits=BOUND)
    report = rt.run([route], on_failure="isolate")
    assert [o.status for o in report.routes] == ["failed"]
    assert entered.is_set() and not release.is_set()


async def test_an_aclose_from_a_cancelled_scope_still_starts_the_close(hanging: Any) -> None:
    import trio

    entered, release, _ = hanging
    env = rt.LocalEnv(_factory(hanging))
    await env.connect()
    with trio.CancelScope() as scope:
        scope.cancel()
        await env.aclose()
    assert entered.wait(10) and not release.is_set()
