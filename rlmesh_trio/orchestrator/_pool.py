"""Env endpoints handed out as they come free.

An env endpoint serves one route at a time (one Join session). Routes that
name the same endpoint (the same address, or the same env object) wait for
it in route order instead of failing "endpoint is in use"; routes on
different endpoints never wait for each other here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from typing import Any

import trio

__all__ = ["EnvGate", "env_key"]


def env_key(value: Any) -> Hashable | None:
    """Which endpoint ``value`` names, or ``None`` when each route gets its own.

    Addresses compare without a ``tcp://`` prefix; objects (a gymnasium env,
    a ``RuntimeEnv``, a list of lanes) by identity. A factory makes a new env
    per route, so it never waits.
    """
    if isinstance(value, str):
        address = value.strip()
        return ("address", address.removeprefix("tcp://"))
    if isinstance(value, list | tuple):
        return ("lanes", tuple(id(item) for item in value))
    if _is_factory(value):
        return None
    return ("object", id(value))


def _is_factory(value: Any) -> bool:
    import gymnasium

    if isinstance(value, gymnasium.Env | gymnasium.vector.VectorEnv):
        return False
    from ..runtime import RuntimeEnv

    return callable(value) and not isinstance(value, RuntimeEnv)


class EnvGate:
    """One lock per env endpoint; :meth:`hold` waits until the endpoint is free.

    Trio locks are fair (FIFO), so routes sharing an endpoint get it in the
    order they asked, which is route order.
    """

    def __init__(self) -> None:
        self._locks: dict[Hashable, trio.Lock] = {}

    @asynccontextmanager
    async def hold(self, value: Any) -> AsyncIterator[None]:
        """Hold ``value``'s endpoint for the body.

        Cancellation: a route cancelled while waiting leaves the queue at once.
        """
        key = env_key(value)
        if key is None:
            yield
            return
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            yield
