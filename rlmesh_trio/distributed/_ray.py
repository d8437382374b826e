"""The Ray backend: shards as threaded Ray actors streaming their items back.

This is the only module that imports ``ray`` (the ``ray`` extra). A shard
actor runs our orchestrator on a Trio run in a thread of its own; its
``run`` method is a streaming generator that yields item batches as they
come, and ``cancel`` (a second actor thread) cancels through the Trio
token, which ``ray.cancel`` cannot do for a running thread. Ray never
retries a shard itself (a replay would stream a different number of
objects): the coordinator replays owed tickets on a fresh actor instead.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._backends import ShardDied, ShardHandle
from ._planner import is_loopback
from ._shard import run_shard
from ._work import Item, ShardEnded, ShardWork

__all__ = ["RayBackend", "ShardActor"]

#: Seconds to wait for a cancelled or finished actor before it is killed.
ACTOR_GRACE_S = 10.0


class ShardActor:
    """Hosts one shard; ``run`` streams its items, ``cancel`` stops it cleanly."""

    def __init__(self) -> None:
        self._cancel: Callable[[str], None] | None = None
        self._started = threading.Event()

    def run(self, work: ShardWork) -> Iterator[list[Item]]:
        items: queue.Queue[Item] = queue.Queue()

        def started(cancel: Callable[[str], None]) -> None:
            self._cancel = cancel
            self._started.set()

        thread = threading.Thread(target=run_shard, args=(work, items.put, started))
        thread.start()
        try:
            while True:
                batch = [items.get()]
                while not isinstance(batch[-1], ShardEnded):
                    try:
                        batch.append(items.get_nowait())
                    except queue.Empty:
                        break
                yield batch
                if isinstance(batch[-1], ShardEnded):
                    return
        finally:
            thread.join()

    def cancel(self, reason: str) -> None:
        self._started.wait(ACTOR_GRACE_S)
        if self._cancel is not None:
            self._cancel(reason)

    def where(self) -> tuple[int, str]:
        """(process id, Ray node id) of this shard: for operators and crash tests."""
        return os.getpid(), ray.get_runtime_context().get_node_id()


# ray's stubs do not list actor options such as max_concurrency; the call is documented API.
_RemoteShard: Any = ray.remote(  # type: ignore[call-overload]
    max_restarts=0, max_task_retries=0, max_concurrency=2
)(ShardActor)


def _pinned(work: ShardWork) -> bool:
    return any(is_loopback(part.route.env) or is_loopback(part.route.model) for part in work.parts)


class _RayShard:
    def __init__(self, work: ShardWork, driver_node: str) -> None:
        options: dict[str, Any] = {"num_cpus": 1}
        if _pinned(work):
            # Loopback endpoints are only reachable from this machine.
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                node_id=driver_node, soft=False
            )
        self._actor = _RemoteShard.options(**options).remote()
        self._stream = self._actor.run.options(num_returns="streaming").remote(work)
        self._cancelled = False

    def batches(self) -> Iterator[list[Item]]:
        try:
            for ref in self._stream:
                batch: list[Item] = ray.get(ref)
                yield batch
                if batch and isinstance(batch[-1], ShardEnded):
                    return
            raise ShardDied("the shard's stream ended without its last item")
        except ray.exceptions.RayError as exc:
            raise ShardDied(f"{type(exc).__name__}: {exc}") from None
        finally:
            ray.kill(self._actor, no_restart=True)

    def cancel(self, reason: str) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        try:
            self._actor.cancel.remote(reason)
        except ray.exceptions.RayError:
            pass  # the actor is gone: nothing left to cancel

    @property
    def actor(self) -> Any:
        return self._actor


class RayBackend:
    """Starts shards as actors on the Ray cluster at ``address`` (a local one if None)."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self._owned = False
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            self._owned = True
        self._driver_node = ray.get_runtime_context().get_node_id()
        self.started: list[_RayShard] = []

    def capacity(self) -> int:
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def start(self, work: ShardWork) -> ShardHandle:
        shard = _RayShard(work, self._driver_node)
        self.started.append(shard)
        return shard

    def close(self) -> None:
        if self._owned and ray.is_initialized():
            ray.shutdown()
