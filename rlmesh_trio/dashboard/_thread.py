"""The dashboard server on a thread of its own, with its own Trio loop.

Why a thread and not the run's loop: the page's work (HTTP parsing, JSON,
the bootstrap, the final report) then never runs between a route's steps,
the server outlives a ``trio.run`` so the final report can still be
served, and it works for any caller of the hooks. The run's side is only
the hook's O(1) state updates under a lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence

import trio

from ._hub import Hub

__all__ = ["ServerThread", "first_error", "parse_address"]

log = logging.getLogger("rlmesh_trio.dashboard")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_address(address: str | None) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``HOST`` or ``None`` as ``(host, port)``; 127.0.0.1 and port 0
    (a free port) by default.

    Raises:
        ValueError: the port is not a number from 0 to 65535.
    """
    if not address:
        return "127.0.0.1", 0
    host, sep, port_text = address.rpartition(":")
    if not sep or (host and ":" in host and not host.startswith("[")):
        host, port_text = address, "0"  # no port, or a bare IPv6 address
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"dashboard address {address!r}: the port must be 0..65535")
    return host, int(port_text)


def first_error(exc: BaseException) -> BaseException:
    """The first plain exception inside (nested) exception groups: what to tell the user."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


class ServerThread:
    """Runs :func:`~._server.serve` on a daemon thread (it never holds up the process's exit);
    :meth:`start` returns the URL.

    Raises (from :meth:`start`):
        DashboardUnavailable: the extra is missing. OSError: the address cannot be bound.
    """

    def __init__(
        self,
        hub: Hub,
        host: str,
        port: int,
        feeders: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.hub = hub
        self.host, self.port = host, port
        self.feeders = tuple(feeders)
        self.url: str | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stopping: trio.Event | None = None

    def start(self, timeout: float = 30.0) -> str:
        if self.url is not None:
            return self.url
        self._thread = threading.Thread(
            target=self._main, name="rlmesh-trio-dashboard", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            raise OSError(f"the dashboard did not start within {timeout:g} s")
        if self._error is not None:
            self._thread.join()
            raise self._error
        assert self.url is not None
        return self.url

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to start(), or logged once the server ran
            if not self._ready.is_set():
                self._error = first_error(exc)
                self._ready.set()
            else:
                log.warning("dashboard server stopped: %s: %s", type(exc).__name__, exc)

    async def _serve(self) -> None:
        from ._server import serve

        self._token = trio.lowlevel.current_trio_token()
        self._stopping = trio.Event()
        async with trio.open_nursery() as nursery:
            self.url = await nursery.start(
                lambda task_status: serve(
                    self.hub,
                    self.host,
                    self.port,
                    self._stopping,  # type: ignore[arg-type]
                    feeders=self.feeders,
                    task_status=task_status,
                )
            )
            self._ready.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and join the thread (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._token is not None and self._stopping is not None:
            try:  # callable from any thread, a Trio run's included
                self._token.run_sync_soon(self._stopping.set)
            except trio.RunFinishedError:
                pass
        thread.join(timeout)
