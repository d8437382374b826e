"""Servers for code that is not Trio: ``start()``, ``wait()``, ``shutdown()`` and ``with``.

The same lifecycle rlmesh 0.1.0's servers offer, on our blocking serve: a
background thread runs it; :meth:`SyncLifecycle.start` returns once the
server is listening (``server.address`` is then set) and raises what a failed
start raised (``OSError`` when the port is taken); :meth:`~SyncLifecycle.wait`
waits for the server to stop (a remote Shutdown, say);
:meth:`~SyncLifecycle.shutdown` stops it, bounded, and may be called any
number of times.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar

__all__ = ["SyncLifecycle"]

log = logging.getLogger("rlmesh_trio.transport.server")


class SyncLifecycle:
    """The thread-backed lifecycle; mixed into :class:`~._server_base.ServerBase`."""

    kind: ClassVar[str] = "endpoint"

    def __init__(self) -> None:
        self._life_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._thread_stopped = threading.Event()
        self._failure: BaseException | None = None

    # What the server supplies (see ServerBase).
    def serve_blocking(self, announce: Callable[[], None]) -> None:
        raise NotImplementedError

    def stop_threadsafe(self) -> None:
        raise NotImplementedError

    def close_bound(self) -> float:
        raise NotImplementedError

    def _reset_stop(self) -> None:
        raise NotImplementedError

    # -- the lifecycle ---------------------------------------------------------------------

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
        with self._life_lock:
            if self._thread is not None:
                raise RuntimeError(f"the {self.kind} server was started already")
            self._reset_stop()
            thread = threading.Thread(
                target=self._run_thread,
                args=(ready,),
                name=f"rlmesh-trio-{self.kind}-server",
                daemon=True,
            )
            self._thread = thread
            thread.start()
        if not ready.wait(timeout):
            self.shutdown()
            raise RuntimeError(f"the {self.kind} server did not start within {timeout}s")
        if self._thread_stopped.is_set():
            thread.join()
            if self._failure is not None:
                raise self._failure
            raise RuntimeError(f"the {self.kind} server stopped before it was listening")
        return self

    def _run_thread(self, ready: threading.Event) -> None:
        try:
            self.serve_blocking(ready.set)
        except BaseException as exc:
            self._failure = exc
            if ready.is_set():
                log.error("%s server failed", self.kind, exc_info=exc)
        finally:
            self._thread_stopped.set()
            ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started server to stop; ``True`` once stopped (or never started),
        ``False`` if ``timeout`` seconds passed first."""
        if self._thread is None:
            return True
        return self._thread_stopped.wait(timeout)

    def shutdown(self) -> None:
        """Stop a started server and wait for it, bounded; idempotent (a no-op when it was
        never started or has stopped).

        An open Join session ends with an UNAVAILABLE status and its connection
        is closed, so a route mid-episode fails cleanly instead of waiting. The
        wait is bounded by the server's close bound plus a second; a thread
        stuck in user code (an env call that never returns) is left behind (a
        daemon thread) with a warning.
        """
        thread = self._thread
        if thread is None or self._thread_stopped.is_set():
            return
        self.stop_threadsafe()
        bound = self.close_bound() + 1.0
        if not self._thread_stopped.wait(bound):
            log.warning(
                "%s server did not stop within %ss; leaving its thread behind", self.kind, bound
            )
            return
        thread.join(bound)

    def __enter__(self) -> Any:
        """Start the server unless it runs already; the ``with`` block's value is the server."""
        if self._thread is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
