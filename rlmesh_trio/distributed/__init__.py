"""Distributed runs: the same routes sharded over processes or a Ray cluster.

``ray`` is an optional extra (``pip install "rlmesh-trio[ray]"``) and is
imported only when ``backend="ray"`` or a cluster server is asked for;
importing this package imports nothing heavy.
"""

from ._api import run_distributed
from ._backends import Backend, ProcessBackend, ShardHandle, ThreadBackend
from ._work import RunOptions, ShardWork

__all__ = [
    "Backend",
    "ProcessBackend",
    "RunOptions",
    "ShardHandle",
    "ShardWork",
    "ThreadBackend",
    "run_distributed",
]
