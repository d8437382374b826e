"""gRPC transport (grpclib hosted inside Trio): clients and servers for rlmesh-wire-v1."""

from ._bridge import asyncio_loop
from ._remote_env import RemoteEnv
from ._remote_model import RemoteModel

__all__ = ["RemoteEnv", "RemoteModel", "asyncio_loop"]
