"""Distributed runs: the same routes sharded over processes or a Ray cluster.

``ray`` is an optional extra (``pip install "rlmesh-trio[ray]"``) and is
imported only when ``backend="ray"`` or a cluster server is asked for;
importing this package imports nothing heavy. The entry point is
``rt.run_distributed`` (its one home is ``rlmesh_trio``); the old
``rlmesh_trio.distributed.run_distributed`` still reads, with a ``DeprecationWarning``,
until the release in ``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

from ._backends import Backend, ProcessBackend, ShardHandle, ThreadBackend
from ._work import ShardWork

__all__ = [
    "Backend",
    "ProcessBackend",
    "ShardHandle",
    "ShardWork",
    "ThreadBackend",
    "serve_envs",
    "serve_models",
]


def serve_envs(*args: object, **kwargs: object) -> object:
    """Env servers as Ray actors (needs the ray extra); see :mod:`._ray_servers`."""
    from ._ray_servers import serve_envs as start

    return start(*args, **kwargs)  # type: ignore[arg-type]


def serve_models(*args: object, **kwargs: object) -> object:
    """Model servers as Ray actors (needs the ray extra); see :mod:`._ray_servers`."""
    from ._ray_servers import serve_models as start

    return start(*args, **kwargs)  # type: ignore[arg-type]


if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
