"""Env and model servers as Ray actors, handed back as addresses for routes.

Each server actor reserves no CPU (a fractional reservation can starve the
shards of a small cluster for good), runs our server on a Trio run in a
thread of its own, and is torn down when the ``with`` block ends. A server
bound to loopback is placed on the caller's node, where routes can reach it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ray
import trio
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..transport.server._env_server import serve_env
from ..transport.server._model_server import serve_model
from ._planner import is_loopback

__all__ = ["serve_envs", "serve_models"]

#: Seconds a server actor may take to bind and report its address.
STARTUP_S = 60.0


def _build(target: Any) -> Any:
    if isinstance(target, str):
        import gymnasium

        return gymnasium.make(target)
    return target() if callable(target) else target


class ServerActor:
    """One env or model server; ``address`` once bound, ``stop`` to end it."""

    def __init__(self, kind: str, target: Any, bind: str, options: dict[str, Any]) -> None:
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(
            target=trio.run, args=(self._serve, kind, target, bind, options), daemon=True
        )
        self._thread.start()
        answer = self._ready.get(timeout=STARTUP_S)
        if isinstance(answer, BaseException):
            raise answer
        self._address = answer

    async def _serve(self, kind: str, target: Any, bind: str, options: dict[str, Any]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        try:
            server_cm: Any
            if kind == "env":
                server_cm = serve_env(_build(target), bind, **options)
            else:
                server_cm = serve_model(target, bind, **options)
            async with server_cm as server:
                self._ready.put(server.address)
                await self._stop.wait()
        except BaseException as exc:
            self._ready.put(exc)
            raise

    def address(self) -> str:
        return self._address

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            self._token.run_sync_soon(self._stop.set)
        self._thread.join(timeout=30)


_RemoteServer: Any = ray.remote(num_cpus=0, max_restarts=0)(ServerActor)


@contextmanager
def _serving(kind: str, target: Any, count: int, bind: str, **options: Any) -> Iterator[list[str]]:
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not ray.is_initialized():
        raise RuntimeError("start Ray first (ray.init(...)), then serve on it")
    placement: dict[str, Any] = {}
    if is_loopback(bind):
        node = ray.get_runtime_context().get_node_id()
        placement["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
    actors = [
        _RemoteServer.options(**placement).remote(kind, target, bind, options) for _ in range(count)
    ]
    try:
        addresses: list[str] = ray.get([actor.address.remote() for actor in actors])
        yield addresses
    finally:
        stops = [actor.stop.remote() for actor in actors]
        ray.wait(stops, num_returns=len(stops), timeout=30)
        for actor in actors:
            ray.kill(actor, no_restart=True)


def serve_envs(
    env: str | Callable[[], Any], count: int, *, bind: str = "127.0.0.1:0", **options: Any
) -> Any:
    """``with serve_envs("CartPole-v1", count=4) as addresses:`` — env servers on the cluster.

    ``env`` is a gymnasium id or a zero-argument factory that pickles (each
    actor builds its own env); ``options`` go to :func:`rlmesh_trio.serve_env`.

    Raises:
        RuntimeError: Ray is not initialized.
    """
    return _serving("env", env, count, bind, **options)


def serve_models(policy: Any, count: int, *, bind: str = "127.0.0.1:0", **options: Any) -> Any:
    """``with serve_models(policy, count=2) as addresses:`` — model servers on the cluster.

    ``policy`` must pickle (a module-level function or object); ``options``
    go to :func:`rlmesh_trio.serve_model`.

    Raises:
        RuntimeError: Ray is not initialized.
    """
    return _serving("model", policy, count, bind, **options)
