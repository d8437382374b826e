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

    ``async with serve_env(env, "127.0.0.1:0") as server:`` then connect to
    ``server.address``. ``env`` and ``options`` are :class:`EnvServer`'s
    (``token``, ``ssl``, ``allow_remote_shutdown``, ``close_env``,
    ``env_thread``; ``"caller"`` is refused: it needs :meth:`EnvServer.serve`).
    The server runs on a dedicated thread with its own plain asyncio loop, so
    it never competes with the caller's Trio tasks for their thread (only for
    the GIL) and the caller's run needs no asyncio. Thread safety: from then on
    the env belongs to the server (called and closed on the server's thread or
    its workers, as ``env_thread`` says); do not use it from other threads.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server: in-flight env calls are drained and the env closed,
    each bounded, while the caller waits shielded for at most the server's
    close bound plus a second (a thread stuck in an env call is left behind
    with a warning). An accepted remote Shutdown stops the server early; the
    block's body keeps running.

    Raises:
        InvalidSpec: a bad address.
        ValueError: an ``env_thread`` this cannot serve.
        OSError: the server cannot listen (the port is taken, say).
    """
    server = EnvServer(env, address, **options)
    server.refuse_thread("serve_env")
    async with serving_in_thread(server):
        yield server
