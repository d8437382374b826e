"""What the env and model servers share: listening, limits, tokens, handshake, serving.

Both servers are grpclib servers on an asyncio loop with the same outer
shape (protocol notes §8): a bind address in the forms 0.1.0 accepts (parsed
by :func:`~._address.parse_address`), a listening socket made here (so port 0
resolves and accepted sockets get ``TCP_NODELAY``), the gRPC health service,
wire-v1's 256 MiB message cap, an optional bearer token compared in constant
time, the generation-only handshake, a Shutdown refused unless allowed, and a
blocking serve that stops on SIGINT/SIGTERM (main thread only) and announces
readiness. Each server keeps its own Join semantics; only this plumbing lives
here.

The blocking serve is also how ``serve_env``/``serve_model`` run a server
inside Trio: :func:`serving_in_thread` runs it on a dedicated thread (its own
plain asyncio loop, no trio-asyncio hop per request, and no competition with
the caller's Trio thread beyond the GIL) and stops it from the Trio side
through a thread-safe stop hook (:meth:`ServerBase.stop_threadsafe`).
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
from . import _bridge, _h2fast
from ._address import Address, parse_address
from ._handshake import local_peer_info

__all__ = [
    "SHUTDOWN_GRACE",
    "Connections",
    "ServerBase",
    "SizeLimitedCodec",
    "defer_error_reset",
    "handshake_reply",
    "serving_in_thread",
    "shutdown_reply",
    "write_ready",
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


def write_ready(ready_fd: int | None, url: str) -> None:
    """Announce readiness the 0.1.0 way: one line with the bound URL on ``ready_fd``, closed."""
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as ready:
            ready.write(url + "\n")


def _sole_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside (possibly nested) groups, or None if there are several."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else None


def _fast_receive_once_connected(protocol: Any) -> None:
    """DATA-only reads skip h2's frame walk (see ``_h2fast``) once the connection is up."""
    made = protocol.connection_made

    def connection_made(transport: Any) -> None:
        made(transport)
        _h2fast.install_fast_receive(protocol)

    protocol.connection_made = connection_made


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
            _fast_receive_once_connected(protocol)
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
        # The thread-safe stop hand-off (see stop_threadsafe): whoever runs the
        # serving loop arms a hook that stops it from any thread.
        self._stop_lock = threading.Lock()
        self._stop_hook: Callable[[], None] | None = None
        self._stop_asked = False

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

    def close_bound(self) -> float:
        """Seconds stopping may take (drain in-flight requests, close); subclasses set it."""
        return 5.0

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped; ``announce()`` once listening.

        What :func:`serving_in_thread` runs on its dedicated thread, and what
        each server's public ``serve()`` wraps. Stops on an accepted remote
        Shutdown, on :meth:`stop_threadsafe`, and (main thread only) on
        SIGINT/SIGTERM.
        """
        raise NotImplementedError

    # -- stopping from another thread ------------------------------------------------------

    def stop_threadsafe(self) -> None:
        """Ask a running serve to stop, from any thread (never blocks).

        An owner's stop: unlike a remote Shutdown it leaves
        :attr:`shutdown_reason` alone. Asked before the serving loop is up, the
        loop stops as soon as it has started.
        """
        with self._stop_lock:
            self._stop_asked = True
            hook = self._stop_hook
        if hook is not None:
            hook()

    def _arm_stop(self, hook: Callable[[], None]) -> None:
        """Called on the serving thread once its loop runs: ``hook()`` stops it from any
        thread (and must swallow "that loop is gone")."""
        with self._stop_lock:
            self._stop_hook = hook
            asked = self._stop_asked
        if asked:
            hook()

    def _disarm_stop(self) -> None:
        with self._stop_lock:
            self._stop_hook = None

    def _reset_stop(self) -> None:
        with self._stop_lock:
            self._stop_asked = False
            self._stop_hook = None

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

    def _serve_trio(self, announce: Callable[[], None]) -> None:
        """Blocking: run :meth:`run` in a new Trio run with a trio-asyncio loop open
        (for servers whose requests need Trio: async or threaded policies)."""
        trio.run(self._serve_main, announce)

    def _on_serve_scope(self, scope: trio.CancelScope) -> None:
        """Called with the blocking serve's cancel scope once its Trio run is up."""
        token = trio.lowlevel.current_trio_token()

        def cancel() -> None:
            try:
                token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass  # that run is over already

        self._arm_stop(cancel)

    async def _serve_main(self, announce: Callable[[], None]) -> None:
        try:
            async with _bridge.asyncio_loop(), trio.open_nursery() as nursery:
                self._on_serve_scope(nursery.cancel_scope)
                if threading.current_thread() is threading.main_thread():
                    nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
                await nursery.start(self._run_then_stop, nursery.cancel_scope)
                announce()
        except BaseExceptionGroup as group:
            # A failure to start (the port is taken) comes out wrapped by each
            # nursery it crossed; raise it as itself, as the plain-asyncio serve does.
            sole = _sole_leaf(group)
            if sole is None:
                raise
            raise sole from None
        finally:
            self._disarm_stop()

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
        announce: Callable[[], None],
        *,
        start: Callable[[], Awaitable[None]],
        stopped: Callable[[], Awaitable[Any]],
        close: Callable[[], Awaitable[None]],
        request_stop: Callable[[str], None],
        owner_stop: Callable[[], None],
        close_timeout: float,
    ) -> None:
        """The blocking serve on a plain asyncio loop (no Trio): ``start``, announce,
        wait for ``stopped`` (SIGINT/SIGTERM call ``request_stop``, and
        :meth:`stop_threadsafe` calls ``owner_stop`` on the loop), then ``close``
        bounded by ``close_timeout``. Runs inside :func:`_bridge.run_plain_asyncio`."""
        loop = _bridge.running_loop()
        await start()
        signals = (signal.SIGINT, signal.SIGTERM)
        handled = threading.current_thread() is threading.main_thread()

        def on_signal(signum: int) -> None:
            self._note_signal(signum)
            request_stop(self._shutdown_reason or "signal")

        def stop_from_elsewhere() -> None:
            try:
                loop.call_soon_threadsafe(owner_stop)
            except RuntimeError:
                pass  # the loop is closed: serving is over already

        try:
            self._arm_stop(stop_from_elsewhere)
            if handled:
                for signum in signals:
                    loop.add_signal_handler(signum, on_signal, signum)
            announce()
            await stopped()
            log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)
        finally:
            self._disarm_stop()
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
async def serving_in_thread(server: S, *, name: str) -> AsyncIterator[S]:
    """Run ``server.serve_blocking`` on a dedicated thread for the ``async with`` block.

    Yields ``server`` once it is listening (``server.address`` is set). A
    failure to start (the port is taken, say) is raised here, as the
    exception the server raised. The server's own loop runs on that thread, so
    its requests never wait for the caller's Trio thread, and it needs no
    trio-asyncio loop in the caller's run.

    Cancellation: leaving the block (normally, by error or by cancellation,
    including while still starting) asks the server to stop with
    :meth:`ServerBase.stop_threadsafe` and waits for its thread, shielded and
    bounded by the server's :meth:`~ServerBase.close_bound` plus a second, so
    it never hangs: a thread stuck in user code (an env call that never
    returns) is left behind (a daemon thread) and a warning logged. An
    accepted remote Shutdown stops the server early; the block's body keeps
    running. A failure while serving or stopping is raised on leaving the
    block unless the body raised first (then it is logged).
    """
    token = trio.lowlevel.current_trio_token()
    settled = trio.Event()  # listening, or the thread has ended
    finished = trio.Event()  # the thread has ended
    failure: list[BaseException] = []

    def tell(fn: Callable[[], None]) -> None:
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            pass  # the caller's run is over: it stopped waiting long ago

    def finish() -> None:
        finished.set()
        settled.set()

    def main() -> None:
        try:
            server.serve_blocking(lambda: tell(settled.set))
        except BaseException as exc:
            failure.append(exc)
        finally:
            tell(finish)

    async def stop_and_wait() -> None:
        server.stop_threadsafe()
        bound = server.close_bound() + 1.0
        with trio.CancelScope(shield=True), trio.move_on_after(bound):
            await finished.wait()
        if not finished.is_set():
            log.warning(
                "%s server %s did not stop within %ss; leaving its thread behind",
                server.kind,
                server._address,
                bound,
            )

    server._reset_stop()
    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    try:
        await settled.wait()
        # A caller cancelled while we started never enters the block, whatever
        # the checkpoints above did with the cancellation.
        await trio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await stop_and_wait()  # cancelled while starting
        raise
    if finished.is_set():
        if failure:
            raise failure[0]
        raise RuntimeError(f"the {server.kind} server stopped before it was listening")
    body_failed = True
    try:
        yield server
        body_failed = False
    finally:
        await stop_and_wait()
        if failure and finished.is_set():
            if body_failed:
                log.error("%s server failed", server.kind, exc_info=failure[0])
            else:
                raise failure[0]
