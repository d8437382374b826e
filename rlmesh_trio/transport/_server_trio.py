"""Running a server from a Trio program: its blocking serve on a thread of its own.

:func:`serving_in_thread` is what ``serve_env``/``serve_model`` and
``server.run`` use. The server's plain asyncio loop runs on that thread, so
its requests never wait for the caller's Trio thread (only for the GIL) and
the caller's run needs no asyncio at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from ._server_base import ServerBase

__all__ = ["run_until_stopped", "serving_in_thread"]

log = logging.getLogger("rlmesh_trio.transport.server")

S = TypeVar("S", bound=ServerBase)


class _Thread:
    """The serving thread as the Trio side sees it: two events and what it raised."""

    def __init__(self, server: ServerBase, name: str) -> None:
        self.server = server
        self.token = trio.lowlevel.current_trio_token()
        self.settled = trio.Event()  # listening, or the thread has ended
        self.finished = trio.Event()  # the thread has ended
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _tell(self, fn: Callable[[], None]) -> None:
        try:
            self.token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass  # the caller's run is over: it stopped waiting long ago

    def _finish(self) -> None:
        self.finished.set()
        self.settled.set()

    def _main(self) -> None:
        try:
            self.server.serve_blocking(lambda: self._tell(self.settled.set))
        except BaseException as exc:
            self.failure.append(exc)
        finally:
            self._tell(self._finish)

    async def stop_and_wait(self) -> None:
        """Ask the server to stop and wait for its thread: shielded, bounded."""
        server = self.server
        server.stop_threadsafe()
        bound = server.close_bound() + 1.0
        with trio.CancelScope(shield=True), trio.move_on_after(bound):
            await self.finished.wait()
        if not self.finished.is_set():
            log.warning(
                "%s server %s did not stop within %ss; leaving its thread behind",
                server.kind,
                server._address,
                bound,
            )


@asynccontextmanager
async def serving_in_thread(server: S, *, name: str) -> AsyncIterator[trio.Event]:
    """Run ``server.serve_blocking`` on a dedicated thread for the ``async with`` block.

    Yields, once the server is listening (``server.address`` is set), an event
    that is set when the server stops by itself (an accepted remote Shutdown).
    A failure to start (the port is taken, say) is raised here, as the
    exception the server raised.

    Cancellation: leaving the block (normally, by error or by cancellation,
    including while still starting) asks the server to stop with
    :meth:`ServerBase.stop_threadsafe` and waits for its thread, shielded and
    bounded by the server's :meth:`~ServerBase.close_bound` plus a second, so
    it never hangs: a thread stuck in user code (an env call that never
    returns) is left behind (a daemon thread) and a warning logged. An
    accepted remote Shutdown stops the server early; the block's body keeps
    running.

    Raises:
        OSError: the server could not listen.
        RuntimeError: the server stopped before it was listening.
        Whatever the server raised while serving or stopping, on leaving the
        block, unless the body raised first (then it is logged).
    """
    serving = _Thread(server, name)
    server._reset_stop()
    serving.thread.start()
    try:
        await serving.settled.wait()
        # A caller cancelled while we started never enters the block, whatever
        # the checkpoints above did with the cancellation.
        await trio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await serving.stop_and_wait()  # cancelled while starting
        raise
    if serving.finished.is_set():
        if serving.failure:
            raise serving.failure[0]
        raise RuntimeError(f"the {server.kind} server stopped before it was listening")
    body_failed = True
    try:
        yield serving.finished
        body_failed = False
    finally:
        await serving.stop_and_wait()
        if serving.failure and serving.finished.is_set():
            if body_failed:
                log.error("%s server failed", server.kind, exc_info=serving.failure[0])
            else:
                raise serving.failure[0]


async def run_until_stopped(server: ServerBase, task_status: Any, *, name: str) -> None:
    """``server.run``: serve on a thread, ``task_status.started(server)`` once listening,
    return when the server stops by itself (a remote Shutdown).

    Cancellation: stops the server as :func:`serving_in_thread` does (shielded,
    bounded).

    Raises:
        What :func:`serving_in_thread` raises.
    """
    async with serving_in_thread(server, name=name) as stopped:
        task_status.started(server)
        await stopped.wait()
