"""Issue 15 item 1 / issue 12 item 4: endpoints handed out as they come free; dynamic dealing."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import trio
import trio.testing

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import read_ledger
from rlmesh_trio.orchestrator._plan import make_plan
from rlmesh_trio.orchestrator._pool import TicketQueue, env_key

from .._durable_policy import angle_policy, gymnasium_episode
from .test_durable_ledger import by_seed


class SlowCartPole(gym.Wrapper):  # type: ignore[type-arg]
    """CartPole that takes ``delay`` seconds per step (a slow endpoint)."""

    def __init__(self, delay: float) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.delay = delay

    def step(self, action: Any) -> Any:
        time.sleep(self.delay)  # the slowness is the subject, not a wait
        return self.env.step(action)


@contextlib.asynccontextmanager
async def cartpole_servers(count: int, *envs: gym.Env) -> AsyncIterator[list[str]]:
    async with contextlib.AsyncExitStack() as stack:
        addresses = []
        for env in [*envs, *(gym.make("CartPole-v1") for _ in range(count))]:
            server = await stack.enter_async_context(rt.serve_env(env))
            addresses.append(server.address)
        yield addresses


def closed_port_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.slow
@pytest.mark.parametrize("cap", [None, 4])
async def test_64_routes_over_4_servers_wait_for_their_endpoint(cap: int | None) -> None:
    async with cartpole_servers(4) as addresses:
        routes = [
            rt.Route(env=addresses[i % 4], model=angle_policy, seeds=(i,), route_id=f"r{i}")
            for i in range(64)
        ]
        report = await rt.run_routes(routes, on_failure="isolate", max_concurrency=cap)
    assert [o.status for o in report.routes] == ["completed"] * 64
    assert by_seed(report) == [gymnasium_episode(s) for s in range(64)]


def test_endpoint_keys() -> None:
    env = gym.make("CartPole-v1")
    assert env_key("tcp://127.0.0.1:5") == env_key("127.0.0.1:5")
    assert env_key(env) == env_key(env) != env_key(gym.make("CartPole-v1"))
    assert env_key(lambda: env) is None  # a factory builds one env per route


def test_queue_hands_out_shrinking_chunks_and_takes_back_unfinished_ones() -> None:
    routes = rt.shard(["a:1", "b:1"], "m:1", seeds=range(20), dealing="dynamic")
    plan = make_plan(routes, ["x", "y"])
    queue = TicketQueue(plan.tickets(), routes=2, dynamic=True)
    first = queue.claim()
    second = queue.claim()
    assert [t.index for t in first] == list(range(5)) and len(second) == 4
    queue.release(first[2:])
    assert [t.index for t in queue.claim()][:3] == [2, 3, 4]
    static = TicketQueue(plan.tickets())
    assert len(static.claim()) == 20 and static.claim() == []


async def test_an_empty_pool_is_drained_only_when_no_claim_is_out() -> None:
    """A route that finds the pool empty while another holds a chunk waits for that
    chunk: if its holder fails, the waiting route runs it (nothing is left to one
    dead route's retries)."""
    routes = rt.shard(["a:1", "b:1"], "m:1", seeds=range(4), dealing="dynamic")
    queue = TicketQueue(make_plan(routes, ["x", "y"]).tickets(), routes=2, dynamic=True)
    held = await queue.next_claim()
    assert [t.index for t in held] == [0]
    while len(queue):  # the live route runs the rest and finishes each chunk
        await queue.next_claim()
        queue.release([])
    got: list[list[int]] = []
    async with trio.open_nursery() as nursery:

        async def waiting_route() -> None:
            got.append([t.index for t in await queue.next_claim()])

        nursery.start_soon(waiting_route)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # held: not drained yet
        queue.release(held)  # the holder failed: its ticket goes back
    assert got == [[0]]
    queue.release([])
    with trio.move_on_after(5):
        assert await queue.next_claim() == []  # every claim settled: drained


async def test_dynamic_dealing_runs_each_seed_once_with_its_trial(tmp_path: Path) -> None:
    seeds = list(range(100, 130))
    async with cartpole_servers(3) as addresses:
        plan = rt.shard(addresses, angle_policy, seeds=seeds, dealing="dynamic")
        assert {r.ticket_pool for r in plan} == {"route"}
        report = await rt.run_routes(plan, ledger=tmp_path / "l.jsonl")
    assert report.ok and by_seed(report) == [gymnasium_episode(s) for s in seeds]
    for episode in report.episodes:
        assert episode.seed == seeds[episode.index] and episode.trial == episode.index
    assert all(o.total_episodes > 0 for o in report.routes)
    tickets = [e.ticket for e in read_ledger(tmp_path / "l.jsonl").entries]
    assert sorted(tickets) == sorted(f"route/{i}" for i in range(30))


@pytest.mark.slow
async def test_a_slow_endpoint_no_longer_holds_its_share_hostage() -> None:
    async with cartpole_servers(2, SlowCartPole(0.02)) as addresses:
        plan = rt.shard(addresses, angle_policy, seeds=range(30), dealing="dynamic")
        report = await rt.run_routes(plan)
    slow, *fast = report.routes
    assert report.ok and report.total_episodes == 30
    assert all(slow.total_episodes < f.total_episodes for f in fast)


async def test_a_dead_endpoints_tickets_go_to_the_others() -> None:
    async with cartpole_servers(2) as addresses:
        plan = rt.shard(
            [closed_port_address(), *addresses], angle_policy, seeds=range(20), dealing="dynamic"
        )
        report = await rt.run_routes(plan, on_failure="isolate")
    dead, *alive = report.routes
    assert dead.status == "failed" and isinstance(dead.error, rt.ConnectError)
    assert all(o.status == "completed" for o in alive)
    assert by_seed(report) == [gymnasium_episode(s) for s in range(20)]


async def test_dynamic_resume_may_bring_other_endpoints(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    seeds = range(24)

    class StopAfter(rt.RuntimeHooks):
        def __init__(self, scope: trio.CancelScope) -> None:
            self.scope, self.left = scope, 7

        async def episode_completed(self, event: Any) -> None:
            self.left -= 1
            if self.left == 0:
                self.scope.cancel()

    async with cartpole_servers(3) as addresses:
        with trio.CancelScope() as scope:
            plan = rt.shard(addresses, angle_policy, seeds=seeds, dealing="dynamic")
            await rt.Orchestrator(plan, hooks=StopAfter(scope), ledger=ledger).run()
    assert 7 <= len(read_ledger(ledger).entries) < 24
    async with cartpole_servers(2) as fewer:
        plan = rt.shard(fewer, angle_policy, seeds=seeds, dealing="dynamic")
        report = await rt.run_routes(plan, ledger=ledger, resume=True)
    assert report.ok and by_seed(report) == [gymnasium_episode(s) for s in seeds]
    assert len({e.ticket for e in read_ledger(ledger).entries}) == 24
    rebuilt = rt.load_ledger(ledger)
    assert [o.route_id for o in rebuilt.routes] == ["route"] and rebuilt.total_episodes == 24


def test_pool_routes_must_agree_on_their_work() -> None:
    one = rt.Route(env="a:1", model="m:1", seeds=(1, 2), route_id="a", ticket_pool="p")
    two = rt.Route(env="b:1", model="m:1", seeds=(1, 3), route_id="b", ticket_pool="p")
    with pytest.raises(rt.InvalidSpec, match="ticket pool p: route b asks for different work"):
        rt.Orchestrator([one, two])
    clash = rt.Route(env="c:1", model="m:1", seeds=(1, 2), route_id="p")
    with pytest.raises(rt.InvalidSpec, match="also the name of a ticket pool"):
        rt.Orchestrator([one, clash])
    with pytest.raises(rt.InvalidSpec, match="dealing must be one of"):
        rt.shard(["a:1"], "m:1", seeds=[1], dealing="random")  # type: ignore[arg-type]


@pytest.mark.slow
async def test_a_dead_endpoint_retrying_holds_nothing_hostage() -> None:
    """Under cancel_siblings too: while the dead route backs off, the others take its share."""
    async with cartpole_servers(2) as addresses:
        plan = rt.shard(
            [closed_port_address(), *addresses], angle_policy, seeds=range(20), dealing="dynamic"
        )
        report = await rt.run_routes(plan, retries=1000, retry_backoff=0.05)
    dead = report.routes[0]
    assert report.ok and dead.retries >= 1 and dead.total_episodes == 0
    assert by_seed(report) == [gymnasium_episode(s) for s in range(20)]
