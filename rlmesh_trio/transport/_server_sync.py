"""A server's blocking serve on a thread of its own, and the lifecycle for code that is not
Trio: ``start()``, ``wait()``, ``shutdown()`` and ``with``.

:class:`ServingThread` is the one way a server runs on a thread: the Trio
side (:mod:`._server_trio`) and :class:`SyncLifecycle` both use it.
:class:`SyncLifecycle` is rlmesh 0.1.0's server lifecycle on our blocking
serve: :meth:`~SyncLifecycle.start` returns once the server is listening
(``server.address`` is then set) and raises what a failed start raised
(``OSError`` when the port is taken); :meth:`~SyncLifecycle.wait` waits for
the server to stop (a remote Shutdown, say); :meth:`~SyncLifecycle.shutdown`
stops it, bounded, and may be called any number of times.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar

__all__ = ["ServingThread", "SyncLifecycle"]

log = logging.getLogger("rlmesh_trio.transport.server")


class ServingThread:
    """``server.serve_blocking`` on a daemon thread: ``on_listening()`` once it listens,
    ``on_ended()`` when the thread is done (both on that thread); :attr:`failure` is
    what the serve raised."""

    def __init__(
        self,
        server: Any,
        *,
        on_listening: Callable[[], None],
        on_ended: Callable[[], None],
    ) -> None:
        self.server = server
        self.failure: BaseException | None = None
        self.ended = threading.Event()
        self._on_listening = on_listening
        self._on_ended = on_ended
        name = f"rlmesh-trio-{server.kind}-server"
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        try:
            self.server.serve_blocking(self._on_listening)
        except BaseException as exc:
            self.failure = exc
        finally:
            self.ended.set()
            self._on_ended()

    def bound(self) -> float:
        """How long stopping may take: the server's close bound plus a second."""
        return float(self.server.close_bound()) + 1.0

    def left_behind(self, bound: float) -> None:
        log.warning(
            "%s server %s did not stop within %ss; leaving its thread behind",
            self.server.kind,
            self.server._address,
            bound,
        )


class SyncLifecycle:
    """The thread-backed lifecycle; mixed into :class:`~._server_base.ServerBase`."""

    kind: ClassVar[str] = "endpoint"

    def __init__(self) -> None:
        self._life_lock = threading.Lock()
        self._serving: ServingThread | None = None

    # What the server supplies (see ServerBase).
    def stop_threadsafe(self) -> None:
        raise NotImplementedError

    def _reset_stop(self) -> None:
        raise NotImplementedError

    def start(self, timeout: float | None = None) -> Any:
        """Serve on a background (daemon) thread; return the server once it is listening.

        ``timeout`` bounds the wait for the server to bind (``None``: no bound).
        Env calls run where ``env_thread`` says, as under ``serve_env``; signals
        are left to the caller (call :meth:`shutdown` from your own handler).

        Raises:
            RuntimeError: the server was started before, or did not bind within
                ``timeout`` (it is then asked to stop).
            OSError: the address cannot be bound (the port is taken, say).
        """
        ready = threading.Event()

        def ended() -> None:
            if ready.is_set() and serving.failure is not None:
                log.error("%s server failed", self.kind, exc_info=serving.failure)
            ready.set()

        with self._life_lock:
            if self._serving is not None:
                raise RuntimeError(f"the {self.kind} server was started already")
            self._reset_stop()
            serving = ServingThread(self, on_listening=ready.set, on_ended=ended)
            self._serving = serving
            serving.thread.start()
        if not ready.wait(timeout):
            self.shutdown()
            raise RuntimeError(f"the {self.kind} server did not start within {timeout}s")
        if serving.ended.is_set():
            serving.thread.join()
            if serving.failure is not None:
                raise serving.failure
            raise RuntimeError(f"the {self.kind} server stopped before it was listening")
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started server to stop; ``True`` once stopped (or never started),
        ``False`` if ``timeout`` seconds passed first."""
        return self._serving is None or self._serving.ended.wait(timeout)

    def shutdown(self) -> None:
        """Stop a started server and wait for it, bounded; idempotent (a no-op when it was
        never started or has stopped).

        An open Join session ends with an UNAVAILABLE status and its connection
        is closed, so a route mid-episode fails cleanly instead of waiting. The
        wait is bounded by the server's close bound plus a second; a thread
        stuck in user code (an env call that never returns) is left behind (a
        daemon thread) with a warning.
        """
        serving = self._serving
        if serving is None or serving.ended.is_set():
            return
        self.stop_threadsafe()
        bound = serving.bound()
        if not serving.ended.wait(bound):
            serving.left_behind(bound)
            return
        serving.thread.join(bound)

    def __enter__(self) -> Any:
        """Start the server unless it runs already; the ``with`` block's value is the server."""
        if self._serving is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
