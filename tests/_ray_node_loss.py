"""Child process of ``test_distributed_nodes_ray.py``: node loss on a two-node Ray cluster.

Run in a fresh process so its Ray cluster never meets another Ray instance of
the test process. The head holds no CPU, so both shards land on the two worker
nodes; the node of the first shard to stream is removed mid-run, and its owed
tickets must run again on the surviving node. Prints one JSON line of results.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray
from ray.cluster_utils import Cluster

import rlmesh_trio as rt
from rlmesh_trio import run_distributed
from rlmesh_trio.distributed._ray import RayBackend
from tests._dist_helpers import episode_keys, inprocess_routes


class _DropFirstNode:
    def __init__(self, cluster: Any, workers: list[Any]) -> None:
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    # A port of its own for the head's GCS: the default one may still be held by a
    # Ray instance of an earlier test that is shutting down.
    cluster = Cluster(
        initialize_head=True,
        connect=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "gcs_server_port": _free_port()},
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    try:
        routes = inprocess_routes(2, 6)
        backend = _DropFirstNode(cluster, workers)
        report = run_distributed(routes, backend, shards=2)
        result = {
            "dropped": backend.dropped,
            "statuses": [o.status for o in report.routes],
            "seeds": sorted(int(e.seed or 0) for e in report.episodes),
            "equal": episode_keys(report) == episode_keys(rt.run(routes)),
        }
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
