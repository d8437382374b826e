"""``ModelServer``: a Python policy served over gRPC (rlmesh-wire-v1 ``ModelService``).

The protocol logic lives in :class:`~rlmesh_trio._modelhost.ModelHost`; this
module only moves its requests and responses over grpclib:

* Handshake: generation check with 0.1.0's texts, our editions and capabilities.
* Join: initial metadata sent at once (0.1.0 clients wait for it before their
  first message), many Join streams, request ids echoed. A sync policy runs
  inline on the event loop, one request after another (answers then come in
  arrival order, which ``concurrent_predict`` allows). Async or threaded
  policies are processed concurrently, up to ``max_concurrency`` requests per
  stream, answered in completion order while requests for the same
  ``env_id`` keep their order.
* Shutdown: refused unless ``allow_remote_shutdown``.
* The gRPC health service (``""`` is SERVING), 256 MiB message limits, an
  optional bearer token and an optional TLS context.

grpclib is asyncio code; everything below the ``# asyncio side`` marker runs
on the trio-asyncio loop. The Trio side owns the lifetime (:meth:`run`).
Policy calls that must happen in Trio (async policies, worker threads) are
handed over a Trio memory channel to a Trio task of ours, and their results
come back through an asyncio future; both loops share one thread, so neither
hand-off blocks.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import os
import platform
import signal
import socket
import ssl as ssl_module
import threading
from collections.abc import Iterable
from typing import Any, cast

import attrs
import betterproto2
import grpclib.const
import grpclib.server
import trio
from grpclib import GRPCError
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.events import RecvRequest, listen
from grpclib.health.service import Health

from .._modelhost import Invoke, ModelHost, PolicyFn, ThreadedInvoker, inline_invoke
from .._version import __version__
from .._wire import (
    CAP_CONCURRENT_PREDICT,
    MAX_MESSAGE_BYTES,
    PROTOCOL_GENERATION,
    WORKFLOW_EDITION,
    core_pb,
    model_pb,
)
from . import _bridge
from ._model_fastwire import decode_join_request, encode_join_response

__all__ = ["BindAddress", "ModelServer", "parse_bind_address"]

log = logging.getLogger("rlmesh_trio.transport.model_server")

DEFAULT_MAX_CONCURRENCY = 32
DRAIN_TIMEOUT = 5.0
SHUTDOWN_DISABLED = "remote shutdown is disabled for this model endpoint"


# ---------------------------------------------------------------------- addresses


@attrs.frozen
class BindAddress:
    """Where to listen: a TCP host and port, or a unix socket path."""

    host: str | None = None
    port: int | None = None
    path: str | None = None


def parse_bind_address(address: str) -> BindAddress:
    """Accept the address forms 0.1.0 accepts (``host:port``, ``tcp://``, ``http://``,
    ``unix:///abs/path``, a bare ``port`` or ``:port`` on 127.0.0.1); refuse ``https://``."""
    text = address.strip()
    if text.startswith("unix://"):
        path = text[len("unix://") :]
        if not path.startswith("/"):
            raise ValueError(f"unix socket address must be absolute: {address!r}")
        return BindAddress(path=path)
    if text.startswith("https://"):
        raise ValueError(f"https:// addresses are not supported (pass ssl= instead): {address!r}")
    for scheme in ("tcp://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"not a host:port address: {address!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range in {address!r}")
    return BindAddress(host=host, port=port)


# ---------------------------------------------------------------------- handshake bits


def _peer_info() -> core_pb.PeerInfo:
    frameworks: dict[str, str] = {}
    for name in ("numpy", "torch", "jax", "gymnasium"):
        module = __import__("sys").modules.get(name)
        version = getattr(module, "__version__", None)
        if isinstance(version, str):
            frameworks[name] = version
    uname = platform.uname()
    return core_pb.PeerInfo(
        component="rlmesh-model",
        package_version=__version__,
        language="python",
        language_version=platform.python_version(),
        os=uname.system.lower(),
        os_version=uname.release,
        arch=uname.machine,
        framework_versions=frameworks,
        extra={
            "rlmesh.workflow.base": WORKFLOW_EDITION,
            "rlmesh.workflow.edition": WORKFLOW_EDITION,
            "implementation": "rlmesh-trio",
        },
    )


class _LimitedCodec(ProtoCodec):
    """grpclib has no message size cap of its own; enforce wire-v1's 256 MiB both ways."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        # Join messages travel as bytes: the Join loop encodes them itself (_model_fastwire).
        data = message if message_type is bytes else super().encode(message, message_type)
        if len(data) > MAX_MESSAGE_BYTES:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
            )
        return data

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > MAX_MESSAGE_BYTES:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
            )
        if message_type is bytes:
            return data
        try:
            return super().decode(data, message_type)
        except Exception as exc:
            # Without a request id no typed reply is possible: end the stream with a status
            # saying why, rather than letting grpclib report an application error (UNKNOWN).
            name = getattr(message_type, "__name__", "message")
            raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a {name}: {exc}") from exc


# ---------------------------------------------------------------------- the server


class ModelServer:
    """Serve ``policy`` on ``address`` over gRPC.

    ``policy`` is anything :func:`rlmesh_trio.policy` accepts. Sync policies
    run inline on the server's event loop unless ``threaded=True`` (then in a
    Trio worker thread, one call at a time); async policies run as Trio tasks.

    Three ways to run it: ``async with serve_model(policy, address)`` inside
    Trio; ``await nursery.start(server.run)``; or blocking :meth:`serve`.
    """

    def __init__(
        self,
        policy: Any,
        address: str = "127.0.0.1:0",
        *,
        token: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        allow_remote_shutdown: bool = False,
        threaded: bool = False,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        editions: Iterable[str] = (WORKFLOW_EDITION,),
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.host = (
            policy if isinstance(policy, ModelHost) else ModelHost(policy, editions=editions)
        )
        self._bind = parse_bind_address(address)
        self._token = token
        self._ssl = ssl
        self.allow_remote_shutdown = allow_remote_shutdown
        self.threaded = threaded
        self.max_concurrency = max_concurrency
        self._address: str | None = None
        self._runner = _TrioRunner(ThreadedInvoker() if threaded else inline_invoke)
        self._shutdown: asyncio.Event | None = None
        self._shutdown_reason: str | None = None
        self._grpc: grpclib.server.Server | None = None

    @property
    def address(self) -> str:
        """The bound address (``127.0.0.1:54321`` or ``unix:///path``); set once running."""
        if self._address is None:
            raise RuntimeError("the model server is not running yet")
        return self._address

    @property
    def url(self) -> str:
        """The bound address with its scheme (``tcp://127.0.0.1:54321``), as a ready-fd line."""
        address = self.address
        return address if address.startswith("unix://") else f"tcp://{address}"

    @property
    def shutdown_reason(self) -> str | None:
        """Why serving stopped: the accepted remote Shutdown's reason, or ``signal SIGTERM``."""
        return self._shutdown_reason

    # ------------------------------------------------------------------ Trio side

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, report ``task_status.started(self)``, and serve until cancelled or a
        remote Shutdown is accepted.

        Needs the transport's asyncio loop (``serve_model`` and :meth:`serve`
        open it). Cancellation: stops accepting, cancels in-flight requests and
        closes connections, bounded by a few seconds even while cancelled.
        """
        if not _bridge.in_loop():
            raise RuntimeError(
                "ModelServer.run needs the transport's asyncio loop: use serve_model(), "
                "ModelServer.serve(), or run it inside `async with asyncio_loop():`"
            )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._runner.run)
            try:
                await _bridge.call(self._start_asyncio)
                task_status.started(self)
                assert self._shutdown is not None
                await _bridge.call(self._shutdown.wait)
                log.info("model server %s shutting down: %s", self._address, self._shutdown_reason)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(DRAIN_TIMEOUT):
                    await self._close()
                nursery.cancel_scope.cancel()

    async def _close(self) -> None:
        await _bridge.call(self._close_asyncio)

    def serve(self, ready_fd: int | None = None) -> None:
        """Serve until SIGINT/SIGTERM or an accepted remote Shutdown (blocking).

        With ``ready_fd``, writes one line with the bound address
        (``tcp://127.0.0.1:54321``) to that file descriptor once listening, then
        closes it, so a parent process can wait for readiness.

        A policy that runs inline (sync, not ``threaded``) never needs Trio, so
        it is served from a plain asyncio loop: trio-asyncio's scheduling costs
        about 70 µs per request, a quarter of the server's CPU per predict.
        Async and threaded policies are served from Trio.
        """
        if self.inline:
            loop = asyncio.SelectorEventLoop()
            try:
                loop.run_until_complete(self._serve_plain_asyncio(ready_fd))
            finally:
                loop.close()
        else:
            trio.run(self._serve_main, ready_fd)

    async def _serve_plain_asyncio(self, ready_fd: int | None) -> None:
        loop = asyncio.get_running_loop()
        await self._start_asyncio()
        assert self._shutdown is not None
        signals = (signal.SIGINT, signal.SIGTERM)
        handled = threading.current_thread() is threading.main_thread()
        try:
            if handled:
                for signum in signals:
                    loop.add_signal_handler(
                        signum, self.request_shutdown, f"signal {signal.Signals(signum).name}"
                    )
            if ready_fd is not None:
                with os.fdopen(ready_fd, "w") as ready:
                    ready.write(self.url + "\n")
            await self._shutdown.wait()
            log.info("model server %s shutting down: %s", self._address, self._shutdown_reason)
        finally:
            if handled:
                for signum in signals:
                    loop.remove_signal_handler(signum)
            try:
                await asyncio.wait_for(self._close_asyncio(), DRAIN_TIMEOUT)
            except TimeoutError:
                log.warning("model server %s: close took over %ss", self._address, DRAIN_TIMEOUT)

    async def _serve_main(self, ready_fd: int | None) -> None:
        async with _bridge.asyncio_loop(), trio.open_nursery() as nursery:
            if threading.current_thread() is threading.main_thread():
                nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
            await nursery.start(self._run_then_stop, nursery.cancel_scope)
            if ready_fd is not None:
                with os.fdopen(ready_fd, "w") as ready:
                    ready.write(self.url + "\n")

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
                self._shutdown_reason = f"signal {signal.Signals(signum).name}"
                log.info("model server %s stopping: %s", self._address, self._shutdown_reason)
                scope.cancel()
                return

    # ------------------------------------------------------------------ asyncio side

    async def _start_asyncio(self) -> None:
        self._shutdown = asyncio.Event()
        service = _ModelService(self)
        server = grpclib.server.Server([service, Health()], codec=_LimitedCodec())
        if self._token is not None:
            listen(server, RecvRequest, self._check_token)
        bind = self._bind
        if bind.path is not None:
            await server.start(path=bind.path, ssl=self._ssl)
            self._address = f"unix://{bind.path}"
        else:
            # Bind the socket ourselves so the resolved port is known without peeking
            # into grpclib's internals.
            family = socket.AF_INET6 if ":" in (bind.host or "") else socket.AF_INET
            # IPPROTO_TCP explicitly: accepted sockets inherit the listener's proto, and
            # asyncio/grpclib only set TCP_NODELAY when it is IPPROTO_TCP (Nagle otherwise
            # adds ~40 ms delayed-ACK stalls to small request/response exchanges).
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((bind.host, bind.port))
                sock.setblocking(False)
                await server.start(sock=sock, ssl=self._ssl)
            except BaseException:
                sock.close()
                raise
            host, port = sock.getsockname()[:2]
            self._address = f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"
        self._grpc = server
        log.info("model server listening on %s", self._address)

    async def _close_asyncio(self) -> None:
        grpc = self._grpc
        if grpc is None:
            return
        self._grpc = None
        grpc.close()
        await grpc.wait_closed()
        if self._bind.path:
            try:
                os.unlink(self._bind.path)
            except OSError:
                pass

    async def _check_token(self, event: RecvRequest) -> None:
        if event.method_name.startswith("/grpc.health."):
            return  # health probes stay open, as orchestrators poll them unauthenticated
        supplied = event.metadata.get("authorization")
        expected = (self._token or "").encode()
        if not isinstance(supplied, str) or not hmac.compare_digest(supplied.encode(), expected):
            raise GRPCError(Status.UNAUTHENTICATED, "invalid model token")

    def request_shutdown(self, reason: str) -> None:
        """Ask :meth:`run` to stop (asyncio side or Trio side; never blocks)."""
        self._shutdown_reason = reason
        if self._shutdown is not None:
            self._shutdown.set()

    def asyncio_invoke(self) -> Invoke:
        """How asyncio-side code runs a policy function: inline when it is a plain sync
        call, otherwise as a Trio task (async policies, worker threads)."""
        runner = self._runner
        threaded = self.threaded

        async def invoke(fn: PolicyFn, arg: Any) -> Any:
            if not fn.is_async and not threaded:
                return fn.fn(arg)
            return await runner.submit(fn, arg)

        return invoke

    @property
    def inline(self) -> bool:
        """True when every request can be answered inline, without a Trio hop."""
        return not self.threaded and not self.host.policy.is_async


class _TrioRunner:
    """Runs policy calls in Trio on behalf of asyncio-side code."""

    def __init__(self, invoke: Invoke) -> None:
        self._invoke = invoke
        self._send, self._recv = trio.open_memory_channel[tuple[PolicyFn, Any, Any]](math.inf)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            async for fn, arg, future in self._recv:
                nursery.start_soon(self._one, fn, arg, future)

    async def _one(self, fn: PolicyFn, arg: Any, future: asyncio.Future[Any]) -> None:
        with trio.CancelScope() as scope:
            # The asyncio caller gave up (its stream was cancelled): stop the call too.
            future.add_done_callback(lambda f: scope.cancel() if f.cancelled() else None)
            try:
                result = await self._invoke(fn, arg)
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                return
            except BaseException:
                if not future.done():
                    future.cancel()
                raise
            if not future.done():
                future.set_result(result)
        if scope.cancelled_caught and not future.done():
            future.cancel()

    async def submit(self, fn: PolicyFn, arg: Any) -> Any:
        """Asyncio side: run ``fn(arg)`` in Trio and await its result."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send.send_nowait((fn, arg, future))
        return await future


# ---------------------------------------------------------------------- asyncio side


def _ordering_keys(request: model_pb.JoinRequest) -> list[str]:
    """The env_ids whose request order this request must keep."""
    name, body = betterproto2.which_one_of(request, "kind")
    body = cast(Any, body)
    if name == "grouped_predict":
        return sorted({g.context.env_id for g in body.groups if g.context is not None})
    context = getattr(body, "context", None)
    return [context.env_id] if context is not None and context.env_id else []


def _decode(data: bytes) -> model_pb.JoinRequest:
    try:
        return decode_join_request(data)
    except Exception as exc:
        # No request id can be read, so no typed reply is possible: end the stream with a
        # status saying why, rather than letting grpclib report an application error.
        raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a JoinRequest: {exc}") from exc


class _ModelService(model_pb.ModelServiceBase):
    """The generated service base, with Join served from the raw stream (asyncio side)."""

    def __init__(self, server: ModelServer) -> None:
        self._server = server
        self._host = server.host

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        mapping = super().__mapping__()
        join = "/rlmesh.model.v1.ModelService/Join"
        # Join carries raw bytes: the loops below parse and serialise the hot Predict
        # shapes by hand (betterproto2 costs 100+ µs per message each way).
        mapping[join] = grpclib.const.Handler(
            self._join, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes
        )
        return mapping

    async def handshake(self, message: model_pb.HandshakeRequest) -> model_pb.HandshakeResponse:
        base = message.base
        if base is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "handshake request missing base")
        generation = base.protocol_generation.strip()
        compatible = generation == PROTOCOL_GENERATION
        return model_pb.HandshakeResponse(
            base=core_pb.HandshakeResponse(
                compatible=compatible,
                peer_info=_peer_info(),
                capabilities={CAP_CONCURRENT_PREDICT: "true"},
                supported_workflow_editions=list(self._host.editions),
                preferred_workflow_edition=WORKFLOW_EDITION,
                error_message=None
                if compatible
                else (
                    f"protocol generation {base.protocol_generation} not compatible with "
                    f"server {PROTOCOL_GENERATION}"
                ),
            )
        )

    async def shutdown(self, message: model_pb.ShutdownRequest) -> model_pb.ShutdownResponse:
        base = message.base
        if base is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "shutdown request missing base")
        if not self._server.allow_remote_shutdown:
            return model_pb.ShutdownResponse(
                base=core_pb.ShutdownResponse(accepted=False, message=SHUTDOWN_DISABLED)
            )
        text = f"shutdown accepted: {base.reason}" if base.reason else "shutdown accepted"
        # Stop after this reply is on its way: the Trio side closes the server.
        asyncio.get_running_loop().call_later(
            0.05, self._server.request_shutdown, base.reason or "remote shutdown"
        )
        return model_pb.ShutdownResponse(base=core_pb.ShutdownResponse(accepted=True, message=text))

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        # Pitfall 1: 0.1.0 clients wait for the response headers before sending anything.
        await stream.send_initial_metadata()
        if self._server.inline:
            await self._join_inline(stream)
        else:
            await _ConcurrentJoin(self._server, stream).run()

    async def _join_inline(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        host = self._host
        invoke = self._server.asyncio_invoke()
        async for data in stream:
            response = await host.handle(_decode(data), invoke)
            await stream.send_message(encode_join_response(response))
            if response.close is not None:
                return  # Close ends the stream with status OK, as 0.1.0 does


class _ConcurrentJoin:
    """One Join stream whose requests run concurrently (async or threaded policies)."""

    def __init__(self, server: ModelServer, stream: grpclib.server.Stream[Any, Any]) -> None:
        self._host = server.host
        self._invoke = server.asyncio_invoke()
        self._stream = stream
        self._slots = asyncio.Semaphore(server.max_concurrency)
        self._send_lock = asyncio.Lock()
        self._tails: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None

    async def run(self) -> None:
        try:
            async for data in self._stream:
                request = _decode(data)
                if self._failure is not None:
                    raise self._failure
                if request.close is not None:
                    await self._drain()
                    response = await self._host.handle(request, self._invoke)
                    await self._send(response)
                    return
                await self._slots.acquire()
                self._spawn(request)
            await self._drain()
            if self._failure is not None:
                raise self._failure
        finally:
            for task in self._tasks:
                task.cancel()

    def _spawn(self, request: model_pb.JoinRequest) -> None:
        keys = _ordering_keys(request)
        before = [self._tails[k] for k in keys if k in self._tails]
        task = asyncio.ensure_future(self._process(request, before))
        self._tasks.add(task)
        for key in keys:
            self._tails[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            self._slots.release()
            for key in keys:
                if self._tails.get(key) is finished:
                    del self._tails[key]
            if not finished.cancelled() and finished.exception() is not None:
                self._failure = self._failure or finished.exception()

        task.add_done_callback(done)

    async def _process(
        self, request: model_pb.JoinRequest, before: list[asyncio.Task[None]]
    ) -> None:
        if before:
            # asyncio.wait, not gather: our cancellation must not cancel the predecessors.
            await asyncio.wait(before)
        response = await self._host.handle(request, self._invoke)
        await self._send(response)

    async def _send(self, response: model_pb.JoinResponse) -> None:
        data = encode_join_response(response)
        async with self._send_lock:
            await self._stream.send_message(data)

    async def _drain(self) -> None:
        while self._tasks:
            await asyncio.wait(list(self._tasks))
