"""``serve_model``: run a :class:`ModelServer` for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._model_server import ModelServer
from ._server_thread import serving_in_thread

__all__ = ["serve_model"]


@asynccontextmanager
async def serve_model(
    policy: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[ModelServer]:
    """Serve ``policy`` over gRPC from a Trio program; yields the server once it is listening.

    ``async with serve_model(policy, "127.0.0.1:0") as server:`` then connect to
    ``server.address``. ``options`` are :class:`ModelServer`'s keyword arguments
    (``token``, ``ssl``, ``allow_remote_shutdown``, ``threaded``,
    ``max_concurrency``, ``editions``). A bad address raises here, as does a
    failure to listen (``OSError`` when the port is taken). The server needs
    no asyncio loop in the caller's run.

    The server runs :meth:`ModelServer.serve`'s machinery on a dedicated
    thread: a sync policy is called inline on that thread's plain asyncio
    loop; an async (Trio) policy runs in a Trio guest run hosted by that loop,
    not the caller's run, so it must not wait on the caller's Trio objects;
    ``threaded`` policies run on worker threads of that guest run. Thread safety: the policy is
    called from threads other than the caller's.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server, cancelling in-flight requests; the caller waits
    shielded and bounded for its thread, so it cannot hang.
    """
    server = ModelServer(policy, address, **options)
    async with serving_in_thread(server):
        yield server
