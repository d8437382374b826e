"""A server's blocking serve on a thread of its own: :class:`ServingThread`, for
``server.start()`` and for Trio programs (:func:`serving_in_thread`). The server's
asyncio loop runs on that thread, so its requests never wait for the caller's Trio
thread (only for the GIL) and the caller's run needs no asyncio at all.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from ._server_base import ServerBase

__all__ = ["ServingThread", "serving_in_thread"]

log = logging.getLogger("rlmesh_trio.transport.server")


class ServingThread:
    """``serve(on_listening)`` on a daemon thread (``server.serve_blocking`` unless
    given), ``on_ended()`` once it is done (on that thread); :attr:`failure` is what
    the serve raised."""

    def __init__(
        self,
        server: ServerBase,
        *,
        on_listening: Callable[[], None],
        on_ended: Callable[[], None],
        serve: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.server = server
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        self._serve = server.serve_blocking if serve is None else serve
        self._on_listening = on_listening
        self._on_ended = on_ended
        name = f"rlmesh-trio-{server.kind}-server"
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        try:
            self._serve(self._on_listening)
        except BaseException as exc:
            self.failure = exc
        finally:
            self.ended.set()
            self._on_ended()

    def raise_failure(self) -> None:
        """For a serve that ended before it listened.

        Raises:
            BaseException: what it raised (RuntimeError when it raised nothing).
        """
        if self.failure is not None:
            raise self.failure
        raise RuntimeError(f"the {self.server.kind} server stopped before it was listening")

    def bound(self) -> float:
        """How long stopping may take: the server's close bound plus a second."""
        return self.server.close_bound() + 1.0

    def left_behind(self, bound: float) -> None:
        log.warning(
            "%s server %s did not stop within %ss; leaving its thread behind",
            self.server.kind,
            self.server._address,
            bound,
        )

    async def stop_from_trio(self, finished: trio.Event) -> None:
        """Ask the server to stop and wait for ``finished`` (the thread's end): shielded,
        bounded by :meth:`bound`."""
        self.server.stop_threadsafe()
        bound = self.bound()
        with trio.CancelScope(shield=True), trio.move_on_after(bound):
            await finished.wait()
        if not finished.is_set():
            self.left_behind(bound)


def _thread_for_trio(server: ServerBase) -> tuple[ServingThread, trio.Event, trio.Event]:
    """The serving thread, and two events it sets in the calling Trio run: listening
    or ended, and ended."""
    token = trio.lowlevel.current_trio_token()
    settled, finished = trio.Event(), trio.Event()

    def tell(fn: Callable[[], None]) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # the caller stopped waiting long ago
            token.run_sync_soon(fn)

    def ended() -> None:
        finished.set()
        settled.set()

    serving = ServingThread(
        server, on_listening=lambda: tell(settled.set), on_ended=lambda: tell(ended)
    )
    return serving, settled, finished


@contextlib.asynccontextmanager
async def serving_in_thread(server: ServerBase) -> AsyncIterator[trio.Event]:
    """Run ``server.serve_blocking`` on a dedicated thread for the ``async with`` block;
    yields, once listening, an event set when the server stops by itself (an
    accepted remote Shutdown; the block's body keeps running).

    Cancellation: leaving the block (however, even while starting) asks the
    server to stop and waits for its thread, shielded and bounded by the
    server's close bound plus a second: a thread stuck in user code is left
    behind (a daemon thread) with a warning.

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
        await serving.stop_from_trio(finished)  # cancelled while starting
        raise
    if finished.is_set():
        serving.raise_failure()
    body_failed = True
    try:
        yield finished
        body_failed = False
    finally:
        await serving.stop_from_trio(finished)
        if serving.failure is not None and finished.is_set():
            if body_failed:
                log.error("%s server failed", server.kind, exc_info=serving.failure)
            else:
                raise serving.failure
