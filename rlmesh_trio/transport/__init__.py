"""gRPC transport for rlmesh-wire-v1: clients and servers on grpclib, hosted inside Trio.

grpclib is asyncio-only. The clients run on a trio-asyncio loop behind one
bridge module (``_bridge``), opened for you by ``run_routes`` (or explicitly
with :func:`asyncio_loop`). Each server runs on a plain asyncio loop of a
thread of its own (``_server_loop``), through grpclib's public API only, so
serving needs no asyncio in the caller's run.
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
