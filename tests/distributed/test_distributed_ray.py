"""Distributed runs on a real local Ray cluster (``-m ray``; needs the ray extra).

One Ray instance serves the module (2 CPUs, temp dir and HOME in a temp
folder, no usage stats); crashes are real: a SIGKILLed shard worker, a
SIGKILLed env server. Node loss has its own two-node cluster in
``test_distributed_nodes_ray.py``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rlmesh_trio as rt
from rlmesh_trio import run_distributed

from .._dist_helpers import (
    episode_keys,
    gymnasium_episode,
    inprocess_routes,
    make_cartpole,
    serve_env_process,
)
from .._ray_cluster import local_ray

# One xdist worker runs both Ray files, the node-loss file first (see its docstring).
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray")]
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    with local_ray(num_cpus=2):
        yield


def _backend(**kwargs: Any) -> Any:
    from rlmesh_trio.distributed._ray import RayBackend

    return RayBackend(**kwargs)


class _Recording(rt.RuntimeHooks):
    def __init__(self, on_first: Any = None) -> None:
        self.completed = 0
        self.on_first = on_first

    async def episode_completed(self, event: Any) -> None:
        self.completed += 1
        if self.completed == 1 and self.on_first is not None:
            self.on_first()


def test_ray_matches_a_local_run_and_streams_episodes(cluster: None) -> None:
    routes = inprocess_routes(4, 3)
    hooks = _Recording()
    report = run_distributed(routes, "ray", shards=2, hooks=hooks)
    assert episode_keys(report) == episode_keys(rt.run(routes))
    assert hooks.completed == 12  # every episode reached the caller's hooks as it finished


def test_served_envs_on_the_cluster_run_routes(cluster: None) -> None:
    from rlmesh_trio.distributed import serve_envs

    with serve_envs("CartPole-v1", count=2) as addresses:
        assert len(addresses) == 2
        routes = rt.shard(envs=addresses, model=inprocess_routes(1, 1)[0].model, seeds=range(6))
        report = run_distributed(routes, "ray", shards=2)
    assert sorted(e.seed for e in report.episodes) == list(range(6))
    for episode in report.episodes:
        assert (episode.steps, episode.reward) == gymnasium_episode(int(episode.seed or 0))


class _KillFirstShard:
    """Wraps the Ray backend: SIGKILL the first shard's worker after its first batch."""

    def __init__(self) -> None:
        self.inner = _backend()
        self.name = "ray"
        self.killed: list[int] = []

    def start(self, work: Any) -> Any:
        handle = self.inner.start(work)
        return handle if work.attempt > 1 or self.killed else _Killing(handle, self.killed)

    def close(self) -> None:
        self.inner.close()


class _Killing:
    def __init__(self, handle: Any, killed: list[int]) -> None:
        self.handle, self.killed = handle, killed

    def batches(self) -> Iterator[Any]:
        for batch in self.handle.batches():
            yield batch
            if not self.killed:
                pid, _node = ray.get(self.handle.actor.where.remote())
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)

    def cancel(self, reason: str) -> None:
        self.handle.cancel(reason)


def test_a_sigkilled_shard_worker_leaves_every_seed_exactly_once(cluster: None) -> None:
    routes = inprocess_routes(2, 8)
    backend = _KillFirstShard()
    report = run_distributed(routes, backend, shards=2)
    assert backend.killed
    assert [o.status for o in report.routes] == ["completed", "completed"]
    assert sorted(e.seed for e in report.episodes) == list(range(16))
    assert episode_keys(report) == episode_keys(rt.run(routes))


def test_a_failed_route_raises_run_failed_with_the_merged_report(cluster: None) -> None:
    good = inprocess_routes(2, 2)
    bad = rt.Route(env="127.0.0.1:9", model=good[0].model, seeds=[0], route_id="bad")
    with pytest.raises(rt.RunFailed) as caught:
        run_distributed([*good, bad], "ray", shards=3)
    assert caught.value.route_id == "bad"
    assert isinstance(caught.value.primary, rt.ConnectError)
    assert caught.value.report.outcome("bad").status == "failed"


def test_a_killed_env_server_fails_its_route_and_keeps_finished_episodes(cluster: None) -> None:
    server = serve_env_process()
    model = inprocess_routes(1, 1)[0].model
    route = rt.Route(env=server.address, model=model, seeds=range(200), route_id="victim")

    def kill() -> None:
        server.kill()

    hooks = _Recording(on_first=kill)
    with server:
        report = run_distributed([route], "ray", shards=1, on_failure="isolate", hooks=hooks)
    outcome = report.outcome("victim")
    assert outcome.status == "failed"
    assert isinstance(outcome.error, rt.EnvRpcError | rt.ConnectError)
    assert 1 <= len(outcome.episodes) < 200


def test_ctrl_c_cancels_every_shard_and_keeps_the_partial_report(cluster: None) -> None:
    routes = inprocess_routes(2, 100)

    def interrupt() -> None:
        threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGINT)).start()

    with pytest.raises(rt.RunInterrupted) as caught:
        run_distributed(routes, "ray", shards=2, hooks=_Recording(on_first=interrupt))
    report = caught.value.report
    assert {o.status for o in report.routes} == {"cancelled"}
    assert 1 <= report.total_episodes < 200
    keys = [(o.route_id, e.index) for o in report.routes for e in o.episodes]
    assert len(keys) == len(set(keys))


def test_a_ticket_pool_on_ray_runs_every_ticket_once_and_resumes(
    cluster: None, tmp_path: Path
) -> None:
    """Issue 24 item 11: dynamic dealing on Ray, with a ledger cut short and resumed."""
    routes = rt.shard(
        [make_cartpole] * 2, inprocess_routes(1, 1)[0].model, range(6), dealing="dynamic"
    )
    local = sorted((e.index, e.seed, e.trial) for e in rt.run(routes).episodes)
    ledger = tmp_path / "pool.jsonl"
    whole = run_distributed(routes, "ray", shards=2, ledger=ledger)
    assert sorted((e.index, e.seed, e.trial) for e in whole.episodes) == local
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(lines[:3]))  # as if stopped after two episodes
    again = run_distributed(routes, "ray", shards=2, ledger=ledger, resume=True)
    assert again.ok and sorted((e.index, e.seed, e.trial) for e in again.episodes) == local
    assert rt.load_ledger(ledger).total_episodes == 6
