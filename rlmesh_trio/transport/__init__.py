"""gRPC transport for rlmesh-wire-v1: Trio-native clients and servers.

The clients (:class:`RemoteEnv`, :class:`RemoteModel`, :func:`check_health`)
and the servers (:class:`EnvServer`, :class:`ModelServer`) run on the I/O-free
:mod:`rlmesh_trio._wire` core over Trio sockets. Each server runs its own
``trio.run`` on a thread of its own (``server/_thread.py``), so serving never
competes with the caller's routes.
"""

from typing import TYPE_CHECKING

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy): a run's clients
# never load the servers (nor the env and model hosts behind them), and a server never
# loads the clients.
if TYPE_CHECKING:
    from .client._health import check_health
    from .client._remote_env import RemoteEnv
    from .client._remote_model import RemoteModel
    from .server._env_server import EnvServer, serve_env
    from .server._model_server import ModelServer, serve_model
else:
    from .._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            ".server._env_server": ("EnvServer", "serve_env"),
            ".client._health": ("check_health",),
            ".server._model_server": ("ModelServer", "serve_model"),
            ".client._remote_env": ("RemoteEnv",),
            ".client._remote_model": ("RemoteModel",),
        },
    )

__all__ = [
    "EnvServer",
    "ModelServer",
    "RemoteEnv",
    "RemoteModel",
    "check_health",
    "serve_env",
    "serve_model",
]
