"""gRPC transport for rlmesh-wire-v1: Trio-native clients and servers.

The clients (:class:`RemoteEnv`, :class:`RemoteModel`, :func:`check_health`)
and the servers (:class:`EnvServer`, :class:`ModelServer`) run on the I/O-free
:mod:`rlmesh_trio.wire` core over Trio sockets. Each server runs its own
``trio.run`` on a thread of its own (``server/_thread.py``), so serving never
competes with the caller's routes.
"""

from .client._health import check_health
from .client._remote_env import RemoteEnv
from .client._remote_model import RemoteModel
from .server._env_server import EnvServer, serve_env
from .server._model_server import ModelServer, serve_model

__all__ = [
    "EnvServer",
    "ModelServer",
    "RemoteEnv",
    "RemoteModel",
    "check_health",
    "serve_env",
    "serve_model",
]
