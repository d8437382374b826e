"""``serve_env``: run an :class:`EnvServer` for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._env_server import EnvServer
from ._server_thread import serving_in_thread

__all__ = ["serve_env"]


@asynccontextmanager
async def serve_env(
    env: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[EnvServer]:
    """Serve ``env`` over gRPC from a Trio program; yields the server once it is listening.

    ``env`` and ``options`` are :class:`EnvServer`'s (``env_thread="caller"`` is
    refused: it needs :meth:`EnvServer.serve`). The server runs on a thread of
    its own with a plain asyncio loop, so the caller's run needs no asyncio.
    Thread safety: from then on the env belongs to the server (called and
    closed on its threads, as ``env_thread`` says); do not use it elsewhere.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server: in-flight env calls are drained and the env closed, each
    bounded, while the caller waits shielded for at most the server's close
    bound plus a second (a thread stuck in an env call is left behind with a
    warning). An accepted remote Shutdown stops the server early; the block's
    body keeps running.

    Raises:
        InvalidSpec: a bad address.
        ValueError: an ``env_thread`` this cannot serve.
        OSError: the server cannot listen (the port is taken, say).
    """
    server = EnvServer(env, address, **options)
    server.refuse_thread("serve_env")
    async with serving_in_thread(server):
        yield server
