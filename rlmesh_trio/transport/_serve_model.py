"""``serve_model``: run a :class:`ModelServer` for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._model_server import ModelServer
from ._server_base import running

__all__ = ["serve_model"]


@asynccontextmanager
async def serve_model(
    policy: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[ModelServer]:
    """Serve ``policy`` over gRPC inside the current Trio run; yields the running server.

    ``async with serve_model(policy, "127.0.0.1:0") as server:`` then connect to
    ``server.address``. ``options`` are :class:`ModelServer`'s keyword arguments
    (``token``, ``ssl``, ``allow_remote_shutdown``, ``threaded``,
    ``max_concurrency``, ``editions``). Opens the transport's asyncio loop
    unless one is already running.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server, cancelling in-flight requests; the close is shielded and
    bounded, so it cannot hang the caller.
    """
    async with running(ModelServer(policy, address, **options)) as server:
        yield server
