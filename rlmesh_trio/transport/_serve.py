"""``serve_env``: run an :class:`EnvServer` for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._env_server import EnvServer
from ._server_base import running

__all__ = ["serve_env"]


@asynccontextmanager
async def serve_env(
    env: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[EnvServer]:
    """Serve ``env`` over gRPC inside the current Trio run; yields the running server.

    ``async with serve_env(env, "127.0.0.1:0") as server:`` then connect to
    ``server.address``. ``env`` is a gymnasium ``Env``, a list of Envs (lanes)
    or a ``VectorEnv``; ``options`` are :class:`EnvServer`'s keyword arguments
    (``token``, ``ssl``, ``allow_remote_shutdown``, ``close_env``). Opens the
    transport's asyncio loop unless one is already running.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server; in-flight env calls are drained and the env closed under
    a shielded, bounded scope, so it cannot hang the caller. An accepted remote
    Shutdown stops the server early; the block's body keeps running.
    """
    async with running(EnvServer(env, address, **options)) as server:
        yield server
