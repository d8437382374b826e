"""rlmesh 0.1.0's own servers inside the test process, and a helper for its blocking clients."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio


@contextmanager
def rlmesh_server(env: Any) -> Iterator[str]:
    """rlmesh 0.1.0's own EnvServer on a background thread; yields its address."""
    import rlmesh

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = rlmesh.EnvServer(env, "127.0.0.1:0")
        server.start()
    try:
        yield server.address
    finally:
        server.shutdown()
        server.wait(10)


async def in_thread(fn: Callable[[], Any]) -> Any:
    """Run one of rlmesh's blocking client calls off the Trio thread."""
    return await trio.to_thread.run_sync(fn)
