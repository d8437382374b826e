"""What the env and model servers share: the blocking serve on a ``trio.run`` of its own
(protocol notes §8), the ways to run it, Handshake and Shutdown; each keeps its own Join.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import ssl as ssl_module
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, ClassVar

import trio

from ... import _wire as wire
from ..._protocol import PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb
from ..._signals import SERVER_SIGNALS, describe_signal, wait_for_signal
from .._address import parse_address
from .._handshake import local_peer_info
from ._call import Handler
from ._net import Listener, Service, open_listener, unary
from ._thread import ServingThread, serving_in_thread

__all__ = ["ServerBase"]

log = logging.getLogger("rlmesh_trio.transport.server")

#: Let a Shutdown reply leave before the server starts closing connections.
SHUTDOWN_GRACE = 0.05


class ServerBase:
    """The plumbing both servers share; subclasses implement :meth:`_serve_blocking`.

    ``_kind`` names the endpoint in logs and in the token refusal
    (``"invalid env token"``, as 0.1.0 words it).
    """

    _kind: ClassVar[str] = "endpoint"
    #: The gRPC service served (``rlmesh.env.v1.EnvService``), the generated module of
    #: its messages, and our component name in handshakes.
    _grpc_service: ClassVar[str]
    _messages: ClassVar[Any]
    _component: ClassVar[str]
    #: A refused Shutdown's message, and the reason an accepted one without any records.
    _shutdown_refusal: ClassVar[str]
    _blank_shutdown_reason: ClassVar[str] = ""

    def __init__(
        self,
        address: str,
        *,
        token: str | None,
        ssl: ssl_module.SSLContext | None,
        allow_remote_shutdown: bool,
        limits: wire.ServerLimits | None = None,
    ) -> None:
        if limits is not None and not isinstance(limits, wire.ServerLimits):
            raise TypeError(f"limits must be a ServerLimits, got {type(limits).__name__}")
        self._limits = limits if limits is not None else wire.ServerLimits()
        self._bind = parse_address(address)
        self._token = token
        self._ssl = ssl
        self._allow_remote_shutdown = allow_remote_shutdown
        self._address: str | None = None
        self._shutdown_reason: str | None = None
        self._stop: trio.Event | None = None  # set to stop serving (one per serve)
        self._listener: Listener | None = None
        self._service: Service | None = None
        # The thread-safe stop hand-off (see _stop_threadsafe): the serving run's token,
        # while it runs, and whether a stop was asked before it ran.
        self._stop_lock = threading.Lock()
        self._serving_run: trio.lowlevel.TrioToken | None = None
        self._stop_asked = False
        self._life_lock = threading.Lock()
        self._serving: ServingThread | None = None  # start()'s thread

    @property
    def address(self) -> str:
        """The bound address (``127.0.0.1:54321`` or ``unix:///path``); set once running.

        Raises:
            RuntimeError: before the server is listening.
        """
        if self._address is None:
            raise RuntimeError(f"the {self._kind} server is not running yet")
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

    def _close_bound(self) -> float:
        """Seconds stopping may take (drain in-flight requests, close); subclasses set it."""
        return 5.0

    # -- ways to run -----------------------------------------------------------------------

    def _serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening: what
        ``serve()`` wraps and every other way of running a server runs on its thread.

        Raises:
            OSError: the address cannot be bound.
        """
        trio.run(self._serve_trio, announce)

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
        self._serve_blocking(self._announcer(ready_fd, announce_as))

    def _refuse_thread(self) -> None:
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
            ValueError: an env server built with ``env_thread="caller"`` (it serves
                only on the caller's thread, from :meth:`serve`).
            OSError: the address cannot be bound.
        """
        async with serving_in_thread(self) as stopped:
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
            ValueError: an env server built with ``env_thread="caller"`` (it serves
                only on the caller's thread, from :meth:`serve`).
            OSError: the address cannot be bound (the port is taken, say).
        """
        ready = threading.Event()

        def ended() -> None:
            if ready.is_set() and serving.failure is not None:
                log.error("%s server failed", self._kind, exc_info=serving.failure)
            ready.set()

        with self._life_lock:
            if self._serving is not None:
                raise RuntimeError(f"the {self._kind} server was started already")
            self._refuse_thread()
            self._reset_stop()
            serving = ServingThread(self, on_listening=ready.set, on_ended=ended)
            self._serving = serving
            serving.thread.start()
        if not ready.wait(timeout):
            self.shutdown()
            raise RuntimeError(f"the {self._kind} server did not start within {timeout}s")
        if serving.ended.is_set():
            serving.thread.join()
            serving.raise_failure()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a started server to stop; ``True`` once stopped, ``False`` if
        ``timeout`` seconds passed first (as rlmesh 0.1.0's servers do).

        Raises:
            ValueError: ``timeout`` is negative, NaN or infinite.
            RuntimeError: the server was never started.
        """
        if timeout is not None and not (math.isfinite(timeout) and timeout >= 0):
            raise ValueError("timeout must be a non-negative finite float or None")
        if self._serving is None:
            raise RuntimeError("wait() called before start()")
        return self._serving.ended.wait(timeout)

    def _close_unstarted(self) -> None:
        """What :meth:`shutdown` does for a server never started (the env server closes
        its env, as 0.1.0's does)."""

    def shutdown(self) -> None:
        """Stop a started server and wait for it; idempotent (a no-op once stopped;
        before :meth:`start`, only :meth:`_close_unstarted`).

        An open Join session ends UNAVAILABLE and its connection is closed, so a
        route mid-episode fails cleanly. The wait is bounded by the server's close
        bound plus a second; a thread stuck in user code (an env call that never
        returns) is left behind (a daemon thread) with a warning.
        """
        serving = self._serving
        if serving is None:
            self._close_unstarted()
            return
        if serving.ended.is_set():
            return
        self._stop_threadsafe()
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

    def _stop_threadsafe(self) -> None:
        """Ask a running serve to stop, from any thread (never blocks), leaving
        :attr:`shutdown_reason` alone; asked before the loop is up, it stops once up."""
        with self._stop_lock:
            self._stop_asked = True
            token, stop = self._serving_run, self._stop
        if token is not None and stop is not None:
            with contextlib.suppress(trio.RunFinishedError):  # serving is over
                token.run_sync_soon(stop.set)

    def _reset_stop(self) -> None:
        with self._stop_lock:
            self._stop_asked = False
            self._serving_run = None

    def _note_signal(self, signum: int) -> None:
        self._shutdown_reason = describe_signal(signum)
        log.info("%s server %s stopping: %s", self._kind, self._address, self._shutdown_reason)

    def _request_shutdown(self, reason: str) -> None:
        """Ask the serve to stop, recording ``reason`` (in the serving run; never
        blocks): an accepted remote Shutdown, or a signal."""
        self._shutdown_reason = reason
        if self._stop is not None:
            self._stop.set()

    # -- the gRPC service ------------------------------------------------------------------

    def _routes(self) -> dict[str, Handler]:
        """What the server serves: path to handler (health is added by the serve)."""
        pb = self._messages
        return {
            f"/{self._grpc_service}/Handshake": unary(self._handshake, pb.HandshakeRequest),
            f"/{self._grpc_service}/Join": self._join,
            f"/{self._grpc_service}/Shutdown": unary(self._shutdown, pb.ShutdownRequest),
        }

    _handshake: Callable[[Any], Awaitable[Any]]
    _join: Handler

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
            GrpcError: INVALID_ARGUMENT when the request has no base.
        """
        if base is None:
            raise wire.GrpcError(wire.GrpcStatus.INVALID_ARGUMENT, "handshake request missing base")
        compatible = base.protocol_generation.strip() == PROTOCOL_GENERATION
        return core_pb.HandshakeResponse(
            compatible=compatible,
            peer_info=local_peer_info(self._component),
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
        :meth:`_request_shutdown` runs once the reply is on its way, with the request's
        reason (or :attr:`blank_shutdown_reason`).

        Raises:
            GrpcError: INVALID_ARGUMENT when the request has no base.
        """
        base = message.base
        if base is None:
            raise wire.GrpcError(wire.GrpcStatus.INVALID_ARGUMENT, "shutdown request missing base")
        if not self._allow_remote_shutdown:
            reply = core_pb.ShutdownResponse(accepted=False, message=self._shutdown_refusal)
        else:
            reason = base.reason or self._blank_shutdown_reason
            assert self._service is not None
            self._service.nursery.start_soon(self._shutdown_later, reason)
            text = f"shutdown accepted: {base.reason}" if base.reason else "shutdown accepted"
            reply = core_pb.ShutdownResponse(accepted=True, message=text)
        return self._messages.ShutdownResponse(base=reply)

    async def _shutdown_later(self, reason: str) -> None:
        await trio.sleep(SHUTDOWN_GRACE)
        self._request_shutdown(reason)

    # -- the blocking serve on a trio.run of its own -----------------------------------------

    async def _close(self) -> None:
        """Stop serving: the listener, then every connection (each call ends UNAVAILABLE,
        a GOAWAY goes out, the socket closes); a subclass adds what else it owns."""
        service = self._service
        if self._listener is not None:
            self._listener.remove_file()
        if service is None:
            return
        for conn in list(service.connections):
            conn.stop_calls()
        await trio.sleep(0.01)  # let the handlers' trailers out
        for conn in list(service.connections):
            conn.close()
        with trio.move_on_after(1.0):
            while service.connections:
                await trio.sleep(0.01)
        for conn in list(service.connections):
            conn.scope.cancel()

    def _all_routes(self) -> dict[str, Handler]:
        from ._health_service import health_routes

        return {**self._routes(), **health_routes()}

    async def _serve_trio(self, announce: Callable[[], None]) -> None:
        """Listen, announce, serve until stopped, then :meth:`_close` (bounded).

        Raises:
            OSError: the address cannot be bound.
        """
        self._stop = stop = trio.Event()
        self._listener = listener = open_listener(self._bind, self._limits, self._ssl)
        self._address = listener.address
        log.info("%s server listening on %s", self._kind, listener.address)
        refusal = f"invalid {self._kind} token"
        try:
            async with trio.open_nursery() as nursery:
                self._service = service = Service(
                    self._all_routes(),
                    self._limits,
                    token=self._token,
                    token_refusal=refusal,
                    nursery=nursery,
                )
                with self._stop_lock:
                    self._serving_run = trio.lowlevel.current_trio_token()
                    if self._stop_asked:
                        stop.set()
                nursery.start_soon(listener.serve, service)
                if threading.current_thread() is threading.main_thread():
                    nursery.start_soon(self._watch_signals)
                announce()
                await stop.wait()
                log.info(
                    "%s server %s stopping: %s", self._kind, self._address, self._shutdown_reason
                )
                close_timeout = self._close_bound()
                with trio.move_on_after(close_timeout) as bounded:
                    await self._close()
                if bounded.cancelled_caught:
                    log.warning(
                        "%s server %s: close took over %ss",
                        self._kind,
                        self._address,
                        close_timeout,
                    )
                nursery.cancel_scope.cancel()
        finally:
            with self._stop_lock:
                self._serving_run = None
            listener.sock.close()
            self._service = None

    async def _watch_signals(self) -> None:
        signum = await wait_for_signal(SERVER_SIGNALS)
        self._note_signal(signum)
        if self._stop is not None:
            self._stop.set()
