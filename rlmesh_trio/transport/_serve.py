"""``serve_env``: run an :class:`EnvServer` for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._env_server import EnvServer
from ._server_trio import serving_in_thread

__all__ = ["serve_env"]


@asynccontextmanager
async def serve_env(
    env: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[EnvServer]:
    """Serve ``env`` over gRPC from a Trio program; yields the server once it is listening.

    ``async with serve_env(env, "127.0.0.1:0") as server:`` then connect to
    ``server.address``. ``env`` is a gymnasium ``Env``, a list of Envs (lanes)
    or a ``VectorEnv``; ``options`` are :class:`EnvServer`'s keyword arguments
    (``token``, ``ssl``, ``allow_remote_shutdown``, ``close_env``,
    ``env_thread``). A bad address or an env that cannot be served raises here,
    as does a failure to listen (``OSError`` when the port is taken). The
    server needs no asyncio loop in the caller's run.

    The server runs :meth:`EnvServer.serve`'s machinery on a dedicated thread
    with its own plain asyncio loop, so it never competes with the caller's
    Trio tasks for their thread (only for the GIL). Thread safety: from then
    on the env belongs to the server. With ``env_thread="auto"`` (default) a
    single env or a vector env is called on the server's thread (``"loop"``:
    cheapest, but a slow env call delays health probes and refusals until it
    returns), lanes on worker threads (``"worker"``, lanes concurrently); the
    env is closed on one of those threads too. Do not use the env from other
    threads while it is served.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server: in-flight env calls are drained and the env closed,
    each bounded, while the caller waits shielded for at most the server's
    close bound plus a second, so it cannot hang (a thread stuck in an env
    call is left behind with a warning). An accepted remote Shutdown stops the
    server early; the block's body keeps running.
    """
    server = EnvServer(env, address, **options)
    server.refuse_thread("serve_env")
    async with serving_in_thread(server):
        yield server
