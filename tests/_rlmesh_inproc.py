"""rlmesh 0.1.0's own servers inside the test process, and a helper for its blocking clients."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio


@asynccontextmanager
async def rlmesh_server(env: Any) -> AsyncIterator[str]:
    """rlmesh 0.1.0's own EnvServer on a background thread; yields its address.

    Its shutdown waits off the Trio thread: a Trio-native client the test just closed
    sends its GOAWAY and closes its socket from this loop, and a shutdown blocking the
    loop would sit through rlmesh's 5 s grace for that still-open connection.
    """
    import rlmesh

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = rlmesh.EnvServer(env, "127.0.0.1:0")
        server.start()
    try:
        yield server.address
    finally:
        await trio.to_thread.run_sync(server.shutdown)
        await trio.to_thread.run_sync(server.wait, 10)


async def in_thread(fn: Callable[[], Any]) -> Any:
    """Run one of rlmesh's blocking client calls off the Trio thread."""
    return await trio.to_thread.run_sync(fn)
