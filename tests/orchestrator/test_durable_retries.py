"""Issue 15 item 4: retries after a broken or unreachable connection (real env servers)."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import read_ledger
from rlmesh_trio.orchestrator._retry import RetryPolicy, is_retriable

from .._durable_policy import angle_policy, gymnasium_episode
from .._restartable import RestartableEnv
from .test_durable_ledger import by_seed, cartpole


class KillOnce(rt.RuntimeHooks):
    """After ``after`` episodes of ``route_id``, SIGKILL ``server``; restart it if ``back``."""

    def __init__(
        self,
        nursery: trio.Nursery,
        server: RestartableEnv,
        route_id: str,
        after: int,
        *,
        back: bool,
    ) -> None:
        self.nursery, self.server, self.route_id = nursery, server, route_id
        self.left, self.back = after, back
        self.restarted = trio.Event()
        self.sessions: list[tuple[str, str]] = []

    async def session_started(self, event: Any) -> None:
        self.sessions.append(("started", event.route_id))

    async def session_ended(self, event: Any) -> None:
        self.sessions.append(("ended", event.route_id))
        self.ended_episodes = event.total_episodes

    async def session_failed(self, event: Any) -> None:
        self.sessions.append(("failed", event.route_id))

    async def episode_completed(self, event: Any) -> None:
        if event.route_id != self.route_id or self.left <= 0:
            return
        self.left -= 1
        if self.left == 0:
            self.server.kill()
            if self.back:
                self.nursery.start_soon(self._restart)

    async def _restart(self) -> None:
        await trio.to_thread.run_sync(self.server.start)
        self.restarted.set()


def test_retriable_errors() -> None:
    closed = "transport error: connection closed"
    assert is_retriable(rt.ConnectError("127.0.0.1:1", "connection refused"))
    assert is_retriable(rt.EnvRpcError("env.step", 3, closed))
    assert is_retriable(rt.ModelRpcError("model", closed))
    assert is_retriable(rt.OperationTimeout("r", "env", "env.step", 3, 1.0))
    assert not is_retriable(rt.OperationTimeout("r", "model", "model.predict", 3, 1.0))
    invalid = rt.EnvRpcError("env.step", 3, "environment error: [INVALID_ACTION] no", code=3)
    assert not is_retriable(invalid)
    assert not is_retriable(rt.EnvRpcError("env.step", 3, "ValueError: bad"))
    for error in (
        rt.ProtocolError("bad frame"),
        rt.InvalidSpec("bad"),
        rt.HookError("bad"),
        rt.ModelRouteMismatch("model", "req-1"),
        rt.HandshakeError("a", "old"),
    ):
        assert not is_retriable(error)


def test_backoff_is_exponential_jittered_and_bounded() -> None:
    policy = RetryPolicy(retries=10, backoff=0.5, max_backoff=4.0)
    rng = random.Random(7)
    for retry, nominal in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        waits = [policy.delay(retry, rng) for _ in range(50)]
        assert all(nominal / 2 <= w <= nominal for w in waits)
        assert len(set(waits)) > 1  # jittered
    # The settings are checked once, where they are given: RunOptions.
    with pytest.raises(rt.InvalidSpec, match="retries must be an integer >= 0, got -1"):
        rt.RunOptions(retries=-1)
    with pytest.raises(rt.InvalidSpec, match="retry_backoff must be a number of seconds"):
        rt.RunOptions(retry_backoff=float("nan"))


@pytest.mark.slow
async def test_a_restarted_env_server_is_reconnected_and_the_ticket_rerun(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    seeds = range(16)
    with RestartableEnv() as a, RestartableEnv() as b:
        async with trio.open_nursery() as nursery:
            hook = KillOnce(nursery, a, "route-0", after=3, back=True)
            plan = rt.shard([a.address, b.address], angle_policy, seeds=seeds)
            report = await rt.run_routes(
                plan, hooks=hook, ledger=ledger, retries=8, retry_backoff=0.1
            )
        assert a.starts == 2
    assert report.ok
    assert by_seed(report) == [gymnasium_episode(s) for s in seeds]
    first, second = report.outcome("route-0"), report.outcome("route-1")
    assert first.retries >= 1 and second.retries == 0  # the other route never noticed
    interrupted = [ep for ep in first.episodes if ep.attempts > 1]
    assert [ep.index for ep in interrupted] == [3]  # the ticket after the third, from its reset
    assert all(ep.attempts == 1 for ep in second.episodes)
    tickets = [entry.ticket for entry in read_ledger(ledger).entries]
    assert len(tickets) == len(set(tickets)) == 16
    assert report.to_dict()["routes"][0]["retries"] == first.retries
    # The caller's hooks see each route's sessions as one: started once, ended once.
    assert sorted(hook.sessions) == sorted(
        [("started", "route-0"), ("ended", "route-0"), ("started", "route-1"), ("ended", "route-1")]
    )


@pytest.mark.slow
async def test_out_of_retries_fails_as_before_and_keeps_finished_episodes(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    with RestartableEnv() as a, RestartableEnv() as b:
        async with trio.open_nursery() as nursery:
            hook = KillOnce(nursery, a, "route-0", after=2, back=False)
            plan = rt.shard([a.address, b.address], angle_policy, seeds=range(400))
            with pytest.raises(rt.RunFailed) as caught:
                await rt.run_routes(plan, hooks=hook, ledger=ledger, retries=2, retry_backoff=0.01)
    report = caught.value.report
    first, second = report.outcome("route-0"), report.outcome("route-1")
    assert first.status == "failed" and isinstance(first.error, rt.ConnectError)
    assert first.retries == 2 and len(first.episodes) == 2
    assert second.status == "cancelled"  # cancel_siblings, once retries ran out
    in_ledger = {entry.ticket for entry in read_ledger(ledger).entries}
    assert in_ledger == {f"{o.route_id}/{ep.index}" for o in report.routes for ep in o.episodes}


@pytest.mark.slow
def test_an_error_no_retry_can_cure_is_not_retried(tmp_path: Path) -> None:
    with RestartableEnv() as a:
        plan = [rt.Route(env=a.address, model=lambda obs: 7, seeds=(1, 2), route_id="bad")]
        report = rt.run(plan, on_failure="isolate", retries=5, retry_backoff=0.01)
    outcome = report.outcome("bad")
    assert outcome.status == "failed" and outcome.retries == 0
    assert isinstance(outcome.error, rt.EnvRpcError) and outcome.error.code is not None


@pytest.mark.slow
@pytest.mark.interop
async def test_retries_over_rlmesh_env_servers(tmp_path: Path) -> None:
    pytest.importorskip("rlmesh")
    seeds = range(10)
    with RestartableEnv("rlmesh") as a, RestartableEnv("rlmesh") as b:
        async with trio.open_nursery() as nursery:
            hook = KillOnce(nursery, a, "route-0", after=2, back=True)
            plan = rt.shard([a.address, b.address], angle_policy, seeds=seeds)
            report = await rt.run_routes(
                plan, hooks=hook, ledger=tmp_path / "l.jsonl", retries=8, retry_backoff=0.1
            )
    assert report.ok and report.outcome("route-0").retries >= 1
    assert by_seed(report) == [gymnasium_episode(s) for s in seeds]


@pytest.mark.slow
async def test_a_restarted_model_server_is_redialled_for_every_route(tmp_path: Path) -> None:
    seeds = range(12)
    with RestartableEnv("our-model", "tests._durable_policy:angle_policy") as model:
        async with trio.open_nursery() as nursery:
            hook = KillOnce(nursery, model, "route-0", after=2, back=True)
            plan = rt.shard([cartpole, cartpole], model.address, seeds=seeds)
            report = await rt.run_routes(
                plan, hooks=hook, ledger=tmp_path / "l.jsonl", retries=8, retry_backoff=0.1
            )
        assert model.starts == 2
    assert report.ok and report.outcome("route-0").retries >= 1
    assert by_seed(report) == [gymnasium_episode(s) for s in seeds]


@pytest.mark.slow
async def test_cancel_during_a_backoff_ends_the_route_cancelled(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    waiting = trio.Event()

    class RetryWatch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "retry 1 of" in record.getMessage():
                waiting.set()

    handler = RetryWatch(logging.INFO)
    logger = logging.getLogger("rlmesh_trio.orchestrator")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        with RestartableEnv() as a:
            async with trio.open_nursery() as nursery:
                hook = KillOnce(nursery, a, "route-0", after=2, back=False)
                plan = rt.shard([a.address], angle_policy, seeds=range(50))
                orchestrator = rt.Orchestrator(
                    plan, hooks=hook, ledger=ledger, retries=3, retry_backoff=60.0
                )
                nursery.start_soon(orchestrator.run)
                await waiting.wait()  # the route is now in its (long) backoff
                nursery.cancel_scope.cancel()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    outcome = orchestrator.report().outcome("route-0")
    assert outcome.status == "cancelled" and isinstance(outcome.error, rt.RouteCancelled)
    assert outcome.retries == 1 and len(outcome.episodes) == 2
    assert len(read_ledger(ledger).entries) == 2
