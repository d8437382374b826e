"""Where shards run: a backend starts a :class:`ShardWork` and streams its items back.

Two backends live here, both on one machine: ``threads`` (a shard per
thread in this process; what the coordinator's tests use, with crash
injection) and ``processes`` (a shard per process, stdlib multiprocessing
with the spawn method). The Ray backend is in :mod:`._ray`, imported only
when asked for.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ._shard import run_shard
from ._work import Item, ShardEnded, ShardWork

__all__ = ["Backend", "ProcessBackend", "ShardDied", "ShardHandle", "ThreadBackend"]

#: How long a handle waits for an item before it checks that its shard is alive.
POLL_S = 0.1


class ShardDied(Exception):
    """A shard stopped without finishing its stream (worker killed, node lost)."""


class ShardHandle(Protocol):
    def batches(self) -> Iterator[list[Item]]:
        """Blocking: the shard's items in small batches, ending after :class:`ShardEnded`.

        Raises:
            ShardDied: the shard stopped before its stream was complete.
        """
        ...

    def cancel(self, reason: str) -> None:
        """Ask the shard to cancel every route (safe from any thread, idempotent)."""
        ...


class Backend(Protocol):
    name: str

    def start(self, work: ShardWork) -> ShardHandle: ...

    def close(self) -> None: ...


def _drain(source: Callable[[float], Item], first: Item) -> list[Item]:
    batch = [first]
    while not isinstance(batch[-1], ShardEnded):
        try:
            batch.append(source(0))
        except queue.Empty:
            break
    return batch


class _ThreadShard:
    def __init__(self, work: ShardWork, crash_after: int | None) -> None:
        self._queue: queue.Queue[Item] = queue.Queue()
        self._cancel: Callable[[str], None] | None = None
        self._started = threading.Event()
        self._crash_after = crash_after
        self._thread = threading.Thread(
            target=self._main, args=(work,), name=f"rlmesh-trio-{work.shard_id}"
        )
        self._thread.start()

    def _main(self, work: ShardWork) -> None:
        def started(cancel: Callable[[str], None]) -> None:
            self._cancel = cancel
            self._started.set()

        try:
            run_shard(work, self._queue.put, started)
        finally:
            self._started.set()

    def _get(self, timeout: float) -> Item:
        return self._queue.get(timeout=timeout) if timeout else self._queue.get_nowait()

    def batches(self) -> Iterator[list[Item]]:
        delivered = 0
        while True:
            try:
                first = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise ShardDied("the shard's thread ended without finishing") from None
                continue
            batch = _drain(self._get, first)
            if self._crash_after is not None and delivered + len(batch) > self._crash_after:
                self.cancel("shard crashed (injected)")
                self._thread.join()
                raise ShardDied(f"injected crash after {self._crash_after} items")
            delivered += len(batch)
            yield batch
            if isinstance(batch[-1], ShardEnded):
                self._thread.join()
                return

    def cancel(self, reason: str) -> None:
        self._started.wait()
        if self._cancel is not None:
            self._cancel(reason)


class ThreadBackend:
    """Shards as threads of this process (a fresh Trio run each).

    ``crash_after`` (tests): a callable ``(work) -> int | None``; a shard whose
    value is an int dies after delivering that many items, as if its worker
    had been killed, and the coordinator must replay what it had not delivered.
    """

    name = "threads"

    def __init__(self, crash_after: Callable[[ShardWork], int | None] | None = None) -> None:
        self._crash_after = crash_after

    def start(self, work: ShardWork) -> ShardHandle:
        crash = self._crash_after(work) if self._crash_after is not None else None
        return _ThreadShard(work, crash)

    def close(self) -> None:
        return None


def _process_main(work: ShardWork, items: Any, cancels: Any) -> None:
    """The child process: run the shard, cancelling it when the parent says so."""

    def started(cancel: Callable[[str], None]) -> None:
        def watch() -> None:
            try:
                reason = cancels.recv()
            except (EOFError, OSError):
                return
            cancel(str(reason))

        threading.Thread(target=watch, name="rlmesh-trio-cancel-watch", daemon=True).start()

    run_shard(work, items.put, started)


class _ProcessShard:
    def __init__(self, context: Any, work: ShardWork) -> None:
        self._items = context.Queue()
        receive, self._send = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_process_main, args=(work, self._items, receive), name=work.shard_id
        )
        self._process.start()
        receive.close()
        self._cancelled = False

    def _get(self, timeout: float) -> Item:
        item: Item = self._items.get(timeout=timeout) if timeout else self._items.get_nowait()
        return item

    def batches(self) -> Iterator[list[Item]]:
        try:
            while True:
                try:
                    first = self._items.get(timeout=POLL_S)
                except queue.Empty:
                    if not self._process.is_alive():
                        code = self._process.exitcode
                        raise ShardDied(f"shard process exited with code {code}") from None
                    continue
                batch = _drain(self._get, first)
                yield batch
                if isinstance(batch[-1], ShardEnded):
                    return
        finally:
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()

    def cancel(self, reason: str) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        try:
            self._send.send(reason)
        except (BrokenPipeError, OSError):
            pass  # the process is gone already

    @property
    def pid(self) -> int | None:
        return self._process.pid


class ProcessBackend:
    """Shards as processes on this machine (multiprocessing, spawn start method)."""

    name = "processes"

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self.started: list[_ProcessShard] = []

    def start(self, work: ShardWork) -> ShardHandle:
        shard = _ProcessShard(self._context, work)
        self.started.append(shard)
        return shard

    def close(self) -> None:
        return None
