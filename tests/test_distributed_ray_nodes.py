"""Node loss on a real two-node Ray cluster (``ray.cluster_utils.Cluster``, ``-m ray``).

The head holds no CPU, so both shards land on the two worker nodes; the node
of the first shard to stream is removed mid-run, and its owed tickets must
run again on the surviving node, each seed exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import rlmesh_trio as rt
from rlmesh_trio.distributed import run_distributed

from ._dist_helpers import episode_keys, inprocess_routes
from ._ray_cluster import ray_environment

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray")


@pytest.fixture
def two_nodes() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    with ray_environment():
        cluster = Cluster(
            initialize_head=True,
            connect=True,
            head_node_args={"num_cpus": 0, "include_dashboard": False},
        )
        workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
        cluster.wait_for_nodes()
        try:
            yield cluster, workers
        finally:
            ray.shutdown()
            cluster.shutdown()


class _DropFirstNode:
    def __init__(self, cluster: Any, workers: list[Any]) -> None:
        from rlmesh_trio.distributed._ray import RayBackend

        self.inner = RayBackend()
        self.name = "ray"
        self.cluster, self.workers = cluster, workers
        self.dropped: list[str] = []

    def start(self, work: Any) -> Any:
        handle = self.inner.start(work)
        return handle if self.dropped else _Dropping(handle, self)

    def close(self) -> None:
        self.inner.close()


class _Dropping:
    def __init__(self, handle: Any, owner: _DropFirstNode) -> None:
        self.handle, self.owner = handle, owner

    def batches(self) -> Iterator[Any]:
        for batch in self.handle.batches():
            yield batch
            if not self.owner.dropped:
                _pid, node_id = ray.get(self.handle.actor.where.remote())
                for node in self.owner.workers:
                    if node.node_id == node_id:
                        self.owner.dropped.append(node_id)
                        self.owner.cluster.remove_node(node, allow_graceful=False)

    def cancel(self, reason: str) -> None:
        self.handle.cancel(reason)


def test_a_lost_node_has_its_owed_tickets_run_on_the_other_node(two_nodes: Any) -> None:
    cluster, workers = two_nodes
    routes = inprocess_routes(2, 6)
    backend = _DropFirstNode(cluster, workers)
    report = run_distributed(routes, backend, shards=2)
    assert backend.dropped, "no node was removed"
    assert [o.status for o in report.routes] == ["completed", "completed"]
    assert sorted(e.seed for e in report.episodes) == list(range(12))
    assert episode_keys(report) == episode_keys(rt.run(routes))
