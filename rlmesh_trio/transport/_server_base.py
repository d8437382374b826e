"""What the env and model servers share: listening, limits, tokens, handshake, blocking serve.

Both servers are grpclib servers on the transport's asyncio loop with the
same outer shape (protocol notes §8): a bind address in the forms 0.1.0
accepts (parsed by :func:`~._address.parse_address`), a listening socket made
here (so port 0 resolves and accepted sockets get ``TCP_NODELAY``), the gRPC
health service, wire-v1's 256 MiB message cap, an optional bearer token
compared in constant time, the generation-only handshake, a Shutdown refused
unless allowed, and a blocking ``serve()`` that stops on SIGINT/SIGTERM and
can announce readiness on a file descriptor. Each server keeps its own Join
semantics; only this plumbing lives here.
"""

from __future__ import annotations

import hmac
import logging
import os
import signal
import socket
import ssl as ssl_module
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

import grpclib.config
import grpclib.server
import trio
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.events import RecvRequest, listen
from grpclib.exceptions import GRPCError
from grpclib.health.service import Health

from .._wire import MAX_MESSAGE_BYTES, PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb
from . import _bridge
from ._address import Address, parse_address
from ._handshake import local_peer_info

__all__ = [
    "SHUTDOWN_GRACE",
    "Connections",
    "ServerBase",
    "SizeLimitedCodec",
    "defer_error_reset",
    "handshake_reply",
    "running",
    "shutdown_reply",
]

log = logging.getLogger("rlmesh_trio.transport.server")

S = TypeVar("S", bound="ServerBase")

#: Let a Shutdown reply leave before the server starts closing connections.
SHUTDOWN_GRACE = 0.05


def _too_big(size: int) -> GRPCError:
    return GRPCError(
        Status.RESOURCE_EXHAUSTED,
        f"message of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
    )


class SizeLimitedCodec(ProtoCodec):
    """grpclib caps no message size itself; apply wire-v1's 256 MiB in both directions.

    A method registered with ``bytes`` request/response types gets the raw
    message (its handler parses and serialises it itself, see the fast codecs).
    An undecodable message becomes INVALID_ARGUMENT: without a request id no
    typed reply is possible, and grpclib would otherwise report UNKNOWN.
    """

    def encode(self, message: Any, message_type: Any) -> bytes:
        data = message if message_type is bytes else super().encode(message, message_type)
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        return data  # type: ignore[no-any-return]

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        if message_type is bytes:
            return data
        try:
            return super().decode(data, message_type)
        except Exception as exc:
            name = getattr(message_type, "__name__", "message")
            raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a {name}: {exc}") from exc


def handshake_reply(
    base: core_pb.HandshakeRequest | None,
    *,
    component: str,
    capabilities: Mapping[str, str],
    editions: Iterable[str],
) -> core_pb.HandshakeResponse:
    """The base HandshakeResponse: only the generation decides compatibility (§2.1);
    editions are the runtime's business. 0.1.0's error text for a mismatch."""
    if base is None:
        raise GRPCError(Status.INVALID_ARGUMENT, "handshake request missing base")
    compatible = base.protocol_generation.strip() == PROTOCOL_GENERATION
    return core_pb.HandshakeResponse(
        compatible=compatible,
        peer_info=local_peer_info(component),
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


def shutdown_reply(
    base: core_pb.ShutdownRequest | None,
    *,
    allowed: bool,
    refusal: str,
    stop: Callable[[str], None],
) -> core_pb.ShutdownResponse:
    """Answer a Shutdown (asyncio side): refused with ``refusal`` unless ``allowed``;
    otherwise ``stop(reason)`` runs shortly after, once the reply is on its way."""
    if base is None:
        raise GRPCError(Status.INVALID_ARGUMENT, "shutdown request missing base")
    if not allowed:
        return core_pb.ShutdownResponse(accepted=False, message=refusal)
    reason = base.reason
    _bridge.running_loop().call_later(SHUTDOWN_GRACE, stop, reason)
    text = f"shutdown accepted: {reason}" if reason else "shutdown accepted"
    return core_pb.ShutdownResponse(accepted=True, message=text)


#: How long an error status waits before the RST_STREAM that tells the client to stop sending.
RESET_DELAY = 0.05


def defer_error_reset(stream: grpclib.server.Stream[Any, Any]) -> None:
    """Send the RST_STREAM that follows an error status a little later (asyncio side).

    grpclib's server resets a stream right after a non-OK trailers-only
    response when the client has not half-closed. With ``TCP_NODELAY`` both
    frames arrive in one read, and a grpclib client then reports
    ``StreamTerminatedError`` instead of the status (it drops a finished
    response once the stream is reset). HTTP/2 allows the reset at any time,
    so it waits :data:`RESET_DELAY` for the client to read the status first.
    Best-effort: reaches into grpclib's h2 stream, and does nothing if absent.
    """
    h2_stream: Any = getattr(stream, "_stream", None)
    reset = getattr(h2_stream, "reset_nowait", None)
    if reset is None:
        return
    loop = _bridge.running_loop()

    def fire(args: tuple[Any, ...]) -> None:
        try:
            if h2_stream.closable:
                reset(*args)
        except Exception:
            pass  # the connection is gone: nothing left to reset

    def deferred(*args: Any) -> None:
        loop.call_later(RESET_DELAY, fire, args)

    h2_stream.reset_nowait = deferred


def _listening_socket(bind: Address) -> socket.socket:
    family = socket.AF_INET6 if ":" in (bind.host or "") else socket.AF_INET
    # IPPROTO_TCP explicitly: accepted sockets inherit the listener's proto, and
    # asyncio/grpclib only set TCP_NODELAY when it is IPPROTO_TCP (with proto 0,
    # Nagle adds ~40 ms delayed-ACK stalls to small request/response exchanges).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind.host, bind.port))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _write_ready(ready_fd: int | None, url: str) -> None:
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as ready:
            ready.write(url + "\n")


class Connections:
    """Track the server's HTTP/2 connections so stopping can say goodbye (GOAWAY).

    grpclib's ``Server.close`` stops listening and cancels handlers but leaves
    connections to die with the process, which 0.1.0 clients log as a broken
    pipe. This reaches into grpclib internals (the protocol factory and the h2
    connection), so every step is best-effort.
    """

    def __init__(self, server: grpclib.server.Server) -> None:
        self._protocols: weakref.WeakSet[Any] = weakref.WeakSet()
        original = getattr(server, "_protocol_factory", None)
        if original is None:
            return

        def factory() -> Any:
            protocol = original()
            self._protocols.add(protocol)
            return protocol

        server._protocol_factory = factory  # type: ignore[method-assign]

    def goaway(self) -> None:
        for protocol in list(self._protocols):
            try:
                connection = protocol.connection
                if connection.is_closing():
                    continue
                connection._connection.close_connection()  # h2: GOAWAY, NO_ERROR
                connection.flush()
            except Exception:
                continue

    def close(self) -> None:
        for protocol in list(self._protocols):
            try:
                protocol.connection.close()
            except Exception:
                continue


class ServerBase:
    """The plumbing both servers share; subclasses implement :meth:`run` (Trio side).

    ``kind`` names the endpoint in logs and in the token refusal
    (``"invalid env token"``, as 0.1.0 words it).
    """

    kind: ClassVar[str] = "endpoint"

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
        self._grpc: grpclib.server.Server | None = None
        self._connections: Connections | None = None

    # -- facts -----------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The bound address (``127.0.0.1:54321`` or ``unix:///path``); set once running."""
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

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        raise NotImplementedError

    # -- asyncio side ----------------------------------------------------------------------

    async def _listen(
        self, service: Any, *, config: grpclib.config.Configuration | None = None
    ) -> grpclib.server.Server:
        """Start a grpclib server for ``service`` plus health; set :attr:`address`."""
        server = grpclib.server.Server([service, Health()], codec=SizeLimitedCodec(), config=config)
        if self._token is not None:
            listen(server, RecvRequest, self._token_check())
        self._connections = Connections(server)
        bind = self._bind
        if bind.path is not None:
            await server.start(path=bind.path, ssl=self._ssl)
            self._address = f"unix://{bind.path}"
        else:
            sock = _listening_socket(bind)
            try:
                await server.start(sock=sock, ssl=self._ssl)
            except BaseException:
                sock.close()
                raise
            host, port = sock.getsockname()[:2]
            self._address = str(Address(host=host, port=port))
        self._grpc = server
        log.info("%s server listening on %s", self.kind, self._address)
        return server

    def _token_check(self) -> Callable[[RecvRequest], Coroutine[Any, Any, None]]:
        expected = (self._token or "").encode()
        refusal = f"invalid {self.kind} token"

        async def check(event: RecvRequest) -> None:
            if event.method_name.startswith("/grpc.health."):
                return  # health probes stay open, as orchestrators poll them unauthenticated
            supplied = event.metadata.get("authorization")
            if not isinstance(supplied, str) or not hmac.compare_digest(
                supplied.encode(), expected
            ):
                raise GRPCError(Status.UNAUTHENTICATED, refusal)

        return check

    def _unlink_socket(self) -> None:
        if self._bind.path:
            try:
                os.unlink(self._bind.path)
            except OSError:
                pass

    # -- blocking serve --------------------------------------------------------------------

    def _serve_trio(self, ready_fd: int | None) -> None:
        """Blocking: run :meth:`run` in a new Trio run with the asyncio loop open."""
        trio.run(self._serve_main, ready_fd)

    def _on_serve_scope(self, scope: trio.CancelScope) -> None:
        """Called with the blocking serve's cancel scope once its Trio run is up."""

    async def _serve_main(self, ready_fd: int | None) -> None:
        async with _bridge.asyncio_loop(), trio.open_nursery() as nursery:
            self._on_serve_scope(nursery.cancel_scope)
            if threading.current_thread() is threading.main_thread():
                nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
            await nursery.start(self._run_then_stop, nursery.cancel_scope)
            _write_ready(ready_fd, self.url)

    async def _run_then_stop(
        self, scope: trio.CancelScope, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            await self.run(task_status=task_status)
        finally:
            scope.cancel()  # a remote Shutdown ends serve() too

    async def _stop_on_signal(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                self._note_signal(signum)
                scope.cancel()
                return

    def _note_signal(self, signum: int) -> None:
        self._shutdown_reason = f"signal {signal.Signals(signum).name}"
        log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)

    async def _serve_plain_asyncio(
        self,
        ready_fd: int | None,
        *,
        start: Callable[[], Awaitable[None]],
        stopped: Callable[[], Awaitable[Any]],
        close: Callable[[], Awaitable[None]],
        request_stop: Callable[[str], None],
        close_timeout: float,
    ) -> None:
        """The blocking serve on a plain asyncio loop (no Trio): ``start``, announce,
        wait for ``stopped`` (SIGINT/SIGTERM call ``request_stop``), then ``close``
        bounded by ``close_timeout``. Runs inside :func:`_bridge.run_plain_asyncio`."""
        loop = _bridge.running_loop()
        await start()
        signals = (signal.SIGINT, signal.SIGTERM)
        handled = threading.current_thread() is threading.main_thread()

        def on_signal(signum: int) -> None:
            self._note_signal(signum)
            request_stop(self._shutdown_reason or "signal")

        try:
            if handled:
                for signum in signals:
                    loop.add_signal_handler(signum, on_signal, signum)
            _write_ready(ready_fd, self.url)
            await stopped()
            log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)
        finally:
            if handled:
                for signum in signals:
                    loop.remove_signal_handler(signum)
            try:
                await _bridge.asyncio_wait_for(close(), close_timeout)
            except TimeoutError:
                log.warning(
                    "%s server %s: close took over %ss", self.kind, self._address, close_timeout
                )


@asynccontextmanager
async def running(server: S) -> AsyncIterator[S]:
    """Run ``server`` in the current Trio run for the ``async with`` block; yield it listening.

    Opens the transport's asyncio loop unless one is already running.
    Cancellation: leaving the block stops the server (its own shielded,
    bounded close runs); an accepted remote Shutdown stops it early while the
    block's body keeps running.
    """
    async with _bridge.asyncio_loop(), trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
