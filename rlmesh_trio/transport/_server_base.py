"""What the env and model servers share: the blocking serve on a plain asyncio loop
(protocol notes §8), the ways to run it, Handshake and Shutdown; each keeps its own Join.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl as ssl_module
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, ClassVar

import grpclib.const
import grpclib.server
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from .._signals import SERVER_SIGNALS, describe_signal
from .._wire import PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb
from . import _server_loop as aio
from ._address import parse_address
from ._handshake import local_peer_info
from ._server_net import Listener, open_listener, unary

__all__ = ["ServerBase"]

log = logging.getLogger("rlmesh_trio.transport.server")

#: Let a Shutdown reply leave before the server starts closing connections.
SHUTDOWN_GRACE = 0.05


class ServerBase:
    """The plumbing both servers share; subclasses implement :meth:`serve_blocking`.

    ``kind`` names the endpoint in logs and in the token refusal
    (``"invalid env token"``, as 0.1.0 words it).
    """

    kind: ClassVar[str] = "endpoint"
    #: The gRPC service served (``rlmesh.env.v1.EnvService``), the generated module of
    #: its messages, and our component name in handshakes.
    service: ClassVar[str]
    messages: ClassVar[Any]
    component: ClassVar[str]
    #: A refused Shutdown's message, and the reason an accepted one without any records.
    shutdown_refusal: ClassVar[str]
    blank_shutdown_reason: ClassVar[str] = ""
    #: HTTP/2 flow-control windows in bytes (``None``: grpclib's 64 KiB).
    http2_window: ClassVar[int | None] = None

    def __init__(
        self,
        address: str,
        *,
        token: str | None,
        ssl: ssl_module.SSLContext | None,
        allow_remote_shutdown: bool,
    ) -> None:
        self._bind = parse_address(address)
        self._token = token
        self._ssl = ssl
        self.allow_remote_shutdown = allow_remote_shutdown
        self._address: str | None = None
        self._shutdown_reason: str | None = None
        self._stop = aio.AsyncioEvent()  # set to stop serving (asyncio side; one per serve)
        self._listener: Listener | None = None
        # The thread-safe stop hand-off (see stop_threadsafe): the serving loop, while
        # it runs, and whether a stop was asked before it ran.
        self._stop_lock = threading.Lock()
        self._serving_loop: aio.AsyncioLoop | None = None
        self._stop_asked = False
        self._life_lock = threading.Lock()
        self._serving: aio.ServingThread | None = None  # start()'s thread

    @property
    def address(self) -> str:
        """The bound address (``127.0.0.1:54321`` or ``unix:///path``); set once running.

        Raises:
            RuntimeError: before the server is listening.
        """
        if self._address is None:
            raise RuntimeError(f"the {self.kind} server is not running yet")
        return self._address

    @property
    def url(self) -> str:
        """The bound address with its scheme (``tcp://127.0.0.1:54321``), as a ready-fd line."""
        address = self.address
        return address if address.startswith("unix://") else f"tcp://{address}"

    @property
    def shutdown_reason(self) -> str | None:
        """Why serving stopped: an accepted remote Shutdown's reason, or ``signal SIGTERM``."""
        return self._shutdown_reason

    def close_bound(self) -> float:
        """Seconds stopping may take (drain in-flight requests, close); subclasses set it."""
        return 5.0

    # -- ways to run -----------------------------------------------------------------------

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening: what
        ``serve()`` wraps and every other way of running a server runs on its thread.

        Raises:
            OSError: the address cannot be bound.
        """
        aio.run_plain_asyncio(lambda: self._serve_plain_asyncio(announce))

    def serve(self, ready_fd: int | None = None, *, announce_as: str | None = None) -> None:
        """Serve until SIGINT/SIGTERM or an accepted remote Shutdown (blocking).

        With ``ready_fd``, writes one line with the bound address
        (``tcp://127.0.0.1:54321``) to that file descriptor once listening, then
        closes it, so a parent process can wait for readiness. With
        ``announce_as``, prints ``serving <announce_as> on <address> (Ctrl+C to
        stop)`` to stderr once listening.

        Raises:
            OSError: the address cannot be bound (the port is taken, say).
        """
        self._reset_stop()
        self.serve_blocking(self._announcer(ready_fd, announce_as))

    def refuse_thread(self) -> None:
        """Refuse to serve from a thread of its own, as only ``env_thread="caller"`` does.

        Raises:
            ValueError: the server needs the caller's thread.
        """

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """``await nursery.start(server.run)``: serve on a thread of its own (as under
        ``serve_env``), ``task_status.started(self)`` once listening, until cancelled or
        a remote Shutdown is accepted.

        Cancellation: stops the server as leaving ``serve_env`` does (shielded and
        bounded, so it cannot hang the caller).

        Raises:
            ValueError: see :meth:`refuse_thread`.
            OSError: the address cannot be bound.
        """
        async with aio.serving_in_thread(self) as stopped:
            task_status.started(self)
            await stopped.wait()

    def start(self, timeout: float | None = None) -> Any:
        """Serve on a background (daemon) thread; return the server once it is listening.

        ``timeout`` bounds the wait for the server to bind (``None``: no bound).
        Env calls run where ``env_thread`` says, as under ``serve_env``; signals
        are left to the caller (call :meth:`shutdown` from your own handler).

        Raises:
            RuntimeError: the server was started before, or did not bind within
                ``timeout`` (it is then asked to stop).
            ValueError: see :meth:`refuse_thread`.
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
            self.refuse_thread()
            self._reset_stop()
            serving = aio.ServingThread(self, on_listening=ready.set, on_ended=ended)
            self._serving = serving
            serving.thread.start()
        if not ready.wait(timeout):
            self.shutdown()
            raise RuntimeError(f"the {self.kind} server did not start within {timeout}s")
        if serving.ended.is_set():
            serving.thread.join()
            serving.raise_failure()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started server to stop; ``True`` once stopped (or never started),
        ``False`` if ``timeout`` seconds passed first."""
        return self._serving is None or self._serving.ended.wait(timeout)

    def shutdown(self) -> None:
        """Stop a started server and wait for it; idempotent (a no-op when it was never
        started or has stopped).

        An open Join session ends UNAVAILABLE and its connection is closed, so a
        route mid-episode fails cleanly. The wait is bounded by the server's close
        bound plus a second; a thread stuck in user code (an env call that never
        returns) is left behind (a daemon thread) with a warning.
        """
        serving = self._serving
        if serving is None or serving.ended.is_set():
            return
        self.stop_threadsafe()
        if not serving.ended.wait(serving.bound):
            serving.left_behind()
            return
        serving.thread.join(serving.bound)

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

    def _announcer(self, ready_fd: int | None, label: str | None) -> Callable[[], None]:
        def announce() -> None:
            if ready_fd is not None:  # as 0.1.0 does: the URL, then the fd is closed
                with os.fdopen(ready_fd, "w") as ready:
                    ready.write(self.url + "\n")
            if label is not None:
                line = f"serving {label} on {self.address} (Ctrl+C to stop)"
                print(line, file=sys.stderr, flush=True)

        return announce

    # -- stopping ----------------------------------------------------------------------------

    def stop_threadsafe(self) -> None:
        """Ask a running serve to stop, from any thread (never blocks), leaving
        :attr:`shutdown_reason` alone; asked before the loop is up, it stops once up."""
        with self._stop_lock:
            self._stop_asked = True
            loop, stop = self._serving_loop, self._stop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: serving is over
                loop.call_soon_threadsafe(stop.set)

    def _reset_stop(self) -> None:
        with self._stop_lock:
            self._stop_asked = False
            self._serving_loop = None

    def _note_signal(self, signum: int) -> None:
        self._shutdown_reason = describe_signal(signum)
        log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)

    def request_shutdown(self, reason: str) -> None:
        """Ask the serve to stop, recording ``reason`` (on the serving loop's thread;
        never blocks): an accepted remote Shutdown, or a signal."""
        self._shutdown_reason = reason
        self._stop.set()

    # -- the gRPC service (asyncio side) ----------------------------------------------------

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        """What grpclib serves, every message through :class:`._server_net.SizeLimitedCodec`."""
        pb, one = self.messages, grpclib.const.Cardinality.UNARY_UNARY
        return {
            f"/{self.service}/Handshake": grpclib.const.Handler(
                unary(self._handshake), one, pb.HandshakeRequest, pb.HandshakeResponse
            ),
            f"/{self.service}/Join": grpclib.const.Handler(
                self._join, grpclib.const.Cardinality.STREAM_STREAM, pb.JoinRequest, pb.JoinResponse
            ),
            f"/{self.service}/Shutdown": grpclib.const.Handler(
                unary(self._shutdown), one, pb.ShutdownRequest, pb.ShutdownResponse
            ),
        }

    _handshake: Callable[[Any], Awaitable[Any]]
    _join: Callable[[grpclib.server.Stream[Any, Any]], Awaitable[None]]

    def _handshake_reply(
        self,
        base: core_pb.HandshakeRequest | None,
        *,
        capabilities: Mapping[str, str],
        editions: Iterable[str],
    ) -> core_pb.HandshakeResponse:
        """The base HandshakeResponse: only the generation decides compatibility (§2.1);
        editions are the runtime's business. 0.1.0's error text for a mismatch.

        Raises:
            GRPCError: INVALID_ARGUMENT when the request has no base.
        """
        if base is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "handshake request missing base")
        compatible = base.protocol_generation.strip() == PROTOCOL_GENERATION
        return core_pb.HandshakeResponse(
            compatible=compatible,
            peer_info=local_peer_info(self.component),
            capabilities=dict(capabilities),
            supported_workflow_editions=list(editions),
            preferred_workflow_edition=WORKFLOW_EDITION,
            error_message=None
            if compatible
            else (
                f"protocol generation {base.protocol_generation} not compatible with server "
                f"{PROTOCOL_GENERATION}"
            ),
        )

    async def _shutdown(self, message: Any) -> Any:
        """A remote Shutdown: refused unless ``allow_remote_shutdown``; otherwise
        :meth:`request_shutdown` runs once the reply is on its way, with the request's
        reason (or :attr:`blank_shutdown_reason`).

        Raises:
            GRPCError: INVALID_ARGUMENT when the request has no base.
        """
        base = message.base
        if base is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "shutdown request missing base")
        if not self.allow_remote_shutdown:
            reply = core_pb.ShutdownResponse(accepted=False, message=self.shutdown_refusal)
        else:
            reason = base.reason or self.blank_shutdown_reason
            aio.running_loop().call_later(SHUTDOWN_GRACE, self.request_shutdown, reason)
            text = f"shutdown accepted: {base.reason}" if base.reason else "shutdown accepted"
            reply = core_pb.ShutdownResponse(accepted=True, message=text)
        return self.messages.ShutdownResponse(base=reply)

    # -- the blocking serve on a plain asyncio loop ------------------------------------------

    async def _close(self) -> None:
        """Stop serving (asyncio side): the listener and whatever else the server owns."""
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close(self.close_bound() / 2)

    async def _serve_plain_asyncio(self, announce: Callable[[], None]) -> None:
        """Listen, announce, serve until stopped, then :meth:`_close` (bounded).

        Raises:
            OSError: the address cannot be bound.
        """
        loop = aio.running_loop()
        self._stop = stop = aio.AsyncioEvent()
        self._listener = await open_listener(self, self._bind, token=self._token, ssl=self._ssl)
        self._address = self._listener.address
        handled = threading.current_thread() is threading.main_thread()

        def on_signal(signum: int) -> None:
            self._note_signal(signum)
            stop.set()

        with self._stop_lock:
            self._serving_loop = loop
            if self._stop_asked:
                stop.set()
        try:
            if handled:
                for signum in SERVER_SIGNALS:
                    loop.add_signal_handler(signum, on_signal, signum)
            announce()
            await stop.wait()
            log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)
        finally:
            with self._stop_lock:
                self._serving_loop = None
            if handled:
                for signum in SERVER_SIGNALS:
                    loop.remove_signal_handler(signum)
            close_timeout = self.close_bound()
            try:
                await aio.asyncio_wait_for(self._close(), close_timeout)
            except TimeoutError:
                log.warning(
                    "%s server %s: close took over %ss", self.kind, self._address, close_timeout
                )
