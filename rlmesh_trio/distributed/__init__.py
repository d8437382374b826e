"""Distributed runs: the same routes sharded over processes or a Ray cluster.

``ray`` is an optional extra (``pip install "rlmesh-trio[ray]"``) and is
imported only when ``backend="ray"`` or a cluster server is asked for;
importing this package imports nothing heavy.
"""

from .._deprecated import moved_names
from ._api import run_distributed
from ._backends import Backend, ProcessBackend, ShardHandle, ThreadBackend
from ._work import ShardWork

__all__ = [
    "Backend",
    "ProcessBackend",
    "ShardHandle",
    "ShardWork",
    "ThreadBackend",
    "run_distributed",
    "serve_envs",
    "serve_models",
]


# One options type for local and distributed runs: rlmesh_trio.RunOptions.
__getattr__, __dir__ = moved_names(__name__, {"RunOptions": "rlmesh_trio"})


def serve_envs(*args: object, **kwargs: object) -> object:
    """Env servers as Ray actors (needs the ray extra); see :mod:`._ray_servers`."""
    from ._ray_servers import serve_envs as start

    return start(*args, **kwargs)  # type: ignore[arg-type]


def serve_models(*args: object, **kwargs: object) -> object:
    """Model servers as Ray actors (needs the ray extra); see :mod:`._ray_servers`."""
    from ._ray_servers import serve_models as start

    return start(*args, **kwargs)  # type: ignore[arg-type]
