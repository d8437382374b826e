"""gRPC transport for rlmesh-wire-v1: Trio-native clients, grpclib servers.

The clients (:class:`RemoteEnv`, :class:`RemoteModel`, :func:`check_health`)
run on the I/O-free :mod:`rlmesh_trio.wire` core over Trio sockets: no asyncio.
The servers use grpclib (asyncio) behind ``_bridge``; :func:`asyncio_loop` is
the servers' helper for hosting one inside a Trio run.
"""

from ._bridge import asyncio_loop
from ._env_server import EnvServer
from ._health import check_health
from ._model_server import ModelServer
from ._remote_env import RemoteEnv
from ._remote_model import RemoteModel
from ._serve import serve_env
from ._serve_model import serve_model

__all__ = [
    "EnvServer",
    "ModelServer",
    "RemoteEnv",
    "RemoteModel",
    "asyncio_loop",
    "check_health",
    "serve_env",
    "serve_model",
]
