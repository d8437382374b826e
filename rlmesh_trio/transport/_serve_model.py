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

    ``options`` are :class:`ModelServer`'s. The server runs on a thread of its
    own with a plain asyncio loop, so the caller's run needs no asyncio. An
    async (Trio) policy runs in a Trio guest run hosted by that loop, not the
    caller's run, so it must not wait on the caller's Trio objects. Thread
    safety: the policy is called from threads other than the caller's.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server, cancelling in-flight requests; the caller waits
    shielded and bounded for its thread, so it cannot hang.

    Raises:
        InvalidSpec: a bad address.
        OSError: the server cannot listen (the port is taken, say).
    """
    server = ModelServer(policy, address, **options)
    async with serving_in_thread(server):
        yield server
