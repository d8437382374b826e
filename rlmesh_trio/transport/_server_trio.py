"""Running a server from a Trio program: its blocking serve on a thread of its own.

:func:`serving_in_thread` is what ``serve_env``/``serve_model`` and
``server.run`` use. The server's plain asyncio loop runs on that thread, so
its requests never wait for the caller's Trio thread (only for the GIL) and
the caller's run needs no asyncio at all.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from ._server_sync import ServingThread

if TYPE_CHECKING:
    from ._server_base import ServerBase

__all__ = ["run_until_stopped", "serving_in_thread"]

log = logging.getLogger("rlmesh_trio.transport.server")


async def _stop_and_wait(serving: ServingThread, finished: trio.Event) -> None:
    """Ask the server to stop and wait for its thread: shielded, bounded."""
    serving.server.stop_threadsafe()
    bound = serving.bound()
    with trio.CancelScope(shield=True), trio.move_on_after(bound):
        await finished.wait()
    if not finished.is_set():
        serving.left_behind(bound)


def _thread_for_trio(server: ServerBase) -> tuple[ServingThread, trio.Event, trio.Event]:
    """The serving thread, and two events it sets in the calling Trio run: listening
    or ended, and ended."""
    token = trio.lowlevel.current_trio_token()
    settled, finished = trio.Event(), trio.Event()

    def tell(fn: Callable[[], None]) -> None:
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass  # the caller's run is over: it stopped waiting long ago

    def ended() -> None:
        finished.set()
        settled.set()

    serving = ServingThread(
        server, on_listening=lambda: tell(settled.set), on_ended=lambda: tell(ended)
    )
    return serving, settled, finished


@asynccontextmanager
async def serving_in_thread(server: ServerBase) -> AsyncIterator[trio.Event]:
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
    serving, settled, finished = _thread_for_trio(server)
    server._reset_stop()
    serving.thread.start()
    try:
        await settled.wait()
        # A caller cancelled while we started never enters the block, whatever
        # the checkpoints above did with the cancellation.
        await trio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await _stop_and_wait(serving, finished)  # cancelled while starting
        raise
    if finished.is_set():
        if serving.failure is not None:
            raise serving.failure
        raise RuntimeError(f"the {server.kind} server stopped before it was listening")
    body_failed = True
    try:
        yield finished
        body_failed = False
    finally:
        await _stop_and_wait(serving, finished)
        if serving.failure is not None and finished.is_set():
            if body_failed:
                log.error("%s server failed", server.kind, exc_info=serving.failure)
            else:
                raise serving.failure


async def run_until_stopped(server: ServerBase, task_status: Any) -> None:
    """``server.run``: serve on a thread, ``task_status.started(server)`` once listening,
    return when the server stops by itself (a remote Shutdown).

    Cancellation: stops the server as :func:`serving_in_thread` does (shielded,
    bounded).

    Raises:
        What :func:`serving_in_thread` raises.
    """
    async with serving_in_thread(server) as stopped:
        task_status.started(server)
        await stopped.wait()
