"""gRPC transport for rlmesh-wire-v1: Trio-native clients and servers (its modules are private).

The clients (``rt.RemoteEnv``, ``rt.RemoteModel``, ``rt.check_health``) and the
servers (``rt.EnvServer``, ``rt.ModelServer``, ``rt.serve_env``, ``rt.serve_model``)
run on the I/O-free :mod:`rlmesh_trio._wire` core over Trio sockets. Each server
runs its own ``trio.run`` on a thread of its own (``server/_thread.py``), so serving
never competes with the caller's routes.

The seven names live at ``rlmesh_trio``; this package exports nothing of its own
now. The old ``rlmesh_trio.transport.<name>`` paths still read, each with a
``DeprecationWarning`` naming the home, until the release in
``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

__all__: list[str] = []

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
