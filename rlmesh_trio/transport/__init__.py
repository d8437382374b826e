"""gRPC transport for rlmesh-wire-v1: Trio-native clients, grpclib servers.

The clients (:class:`RemoteEnv`, :class:`RemoteModel`, :func:`check_health`)
run on the I/O-free :mod:`rlmesh_trio.wire` core over Trio sockets: no asyncio.
Each server runs on a plain asyncio loop of a thread of its own
(``_server_loop``), through grpclib's public API only, so serving needs no
asyncio in the caller's run.
"""

from ._env_server import EnvServer, serve_env
from ._health import check_health
from ._model_server import ModelServer, serve_model
from ._remote_env import RemoteEnv
from ._remote_model import RemoteModel

__all__ = [
    "EnvServer",
    "ModelServer",
    "RemoteEnv",
    "RemoteModel",
    "check_health",
    "serve_env",
    "serve_model",
]
