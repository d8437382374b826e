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
on the server's asyncio loop. A sync policy (not ``threaded``) needs no Trio:
the blocking :meth:`ModelServer.serve`, and ``serve_model`` (which runs that
blocking serve on a dedicated thread), serve it from a plain asyncio loop.
Otherwise the loop is trio-asyncio's inside a Trio run that owns the lifetime
(:meth:`run`): a Trio run of the server's own thread, or the caller's for
``nursery.start(server.run)``. Policy calls that must happen in Trio (async
policies, worker threads) are handed over a Trio memory channel to a Trio
task of ours, and their results come back through an asyncio future; both
loops share one thread, so neither hand-off blocks.
"""

from __future__ import annotations

import logging
import math
import ssl as ssl_module
from collections.abc import Callable, Iterable
from typing import Any, cast

import betterproto2
import grpclib.const
import grpclib.server
import trio
from grpclib import GRPCError
from grpclib.const import Status

from .._modelhost import Invoke, ModelHost, PolicyFn, ThreadedInvoker, inline_invoke
from .._wire import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, model_pb
from . import _bridge, _h2fast
from ._handshake import MODEL_COMPONENT
from ._model_fastwire import decode_join_request, encode_join_response
from ._server_base import (
    ServerBase,
    defer_error_reset,
    handshake_reply,
    shutdown_reply,
    write_ready,
)

__all__ = ["ModelServer"]

log = logging.getLogger("rlmesh_trio.transport.model_server")

DEFAULT_MAX_CONCURRENCY = 32
DRAIN_TIMEOUT = 5.0
SHUTDOWN_DISABLED = "remote shutdown is disabled for this model endpoint"


# ---------------------------------------------------------------------- the server


class ModelServer(ServerBase):
    """Serve ``policy`` on ``address`` over gRPC.

    ``policy`` is anything :func:`rlmesh_trio.policy` accepts. Sync policies
    run inline on the server's event loop unless ``threaded=True`` (then in a
    Trio worker thread, one call at a time); async policies run as Trio tasks.

    Three ways to run it: ``async with serve_model(policy, address)`` inside
    Trio (the blocking serve on a thread of its own); blocking :meth:`serve`;
    or ``await nursery.start(server.run)`` with the transport's asyncio loop
    open (served by the caller's Trio thread through trio-asyncio).
    """

    kind = "model"

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
        super().__init__(address, token=token, ssl=ssl, allow_remote_shutdown=allow_remote_shutdown)
        self.host = (
            policy if isinstance(policy, ModelHost) else ModelHost(policy, editions=editions)
        )
        self.threaded = threaded
        self.max_concurrency = max_concurrency
        self._runner = _TrioRunner(ThreadedInvoker() if threaded else inline_invoke)
        self._shutdown: _bridge.AsyncioEvent | None = None

    # ------------------------------------------------------------------ Trio side

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, report ``task_status.started(self)``, and serve until cancelled or a
        remote Shutdown is accepted.

        Served by the current Trio thread through trio-asyncio; needs the
        transport's asyncio loop (``async with asyncio_loop():``; the blocking
        serve opens one for async and threaded policies). ``serve_model`` runs
        the blocking serve on a thread of its own instead.

        Cancellation: stops accepting, cancels in-flight requests and closes
        connections, bounded by a few seconds even while cancelled.
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
                    await _bridge.call(self._close_asyncio)
                nursery.cancel_scope.cancel()

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
        self._reset_stop()
        self.serve_blocking(lambda: write_ready(ready_fd, self.url))

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening
        (what ``serve_model`` runs on its thread)."""
        if not self.inline:
            self._serve_trio(announce)
            return

        async def main() -> None:
            await self._serve_plain_asyncio(
                announce,
                start=self._start_asyncio,
                stopped=self._stopped,
                close=self._close_asyncio,
                request_stop=self.request_shutdown,
                owner_stop=self._owner_stop,
                close_timeout=DRAIN_TIMEOUT,
            )

        _bridge.run_plain_asyncio(main)

    def close_bound(self) -> float:
        """Stopping cancels in-flight requests and closes connections, bounded."""
        return DRAIN_TIMEOUT

    # ------------------------------------------------------------------ asyncio side

    async def _start_asyncio(self) -> None:
        self._shutdown = _bridge.AsyncioEvent()
        await self._listen(_ModelService(self))

    async def _stopped(self) -> None:
        assert self._shutdown is not None
        await self._shutdown.wait()

    async def _close_asyncio(self) -> None:
        grpc = self._grpc
        if grpc is None:
            return
        self._grpc = None
        grpc.close()
        await grpc.wait_closed()
        self._unlink_socket()

    def request_shutdown(self, reason: str) -> None:
        """Ask :meth:`run` to stop (on the serving loop's thread; never blocks)."""
        self._shutdown_reason = reason
        if self._shutdown is not None:
            self._shutdown.set()

    def _owner_stop(self) -> None:
        # stop_threadsafe's hook, on the loop: stop without recording a reason.
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

    async def _one(self, fn: PolicyFn, arg: Any, future: _bridge.AsyncioFuture[Any]) -> None:
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
        future: _bridge.AsyncioFuture[Any] = _bridge.running_loop().create_future()
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
        return model_pb.HandshakeResponse(
            base=handshake_reply(
                message.base,
                component=MODEL_COMPONENT,
                capabilities={CAP_CONCURRENT_PREDICT: "true"},
                editions=self._host.editions,
            )
        )

    async def shutdown(self, message: model_pb.ShutdownRequest) -> model_pb.ShutdownResponse:
        server = self._server
        return model_pb.ShutdownResponse(
            base=shutdown_reply(
                message.base,
                allowed=server.allow_remote_shutdown,
                refusal=SHUTDOWN_DISABLED,
                stop=lambda reason: server.request_shutdown(reason or "remote shutdown"),
            )
        )

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        defer_error_reset(stream)
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
            await _h2fast.send_server_message(stream, encode_join_response(response))
            if response.close is not None:
                return  # Close ends the stream with status OK, as 0.1.0 does


class _ConcurrentJoin:
    """One Join stream whose requests run concurrently (async or threaded policies)."""

    def __init__(self, server: ModelServer, stream: grpclib.server.Stream[Any, Any]) -> None:
        self._host = server.host
        self._invoke = server.asyncio_invoke()
        self._stream = stream
        self._slots = _bridge.AsyncioSemaphore(server.max_concurrency)
        self._send_lock = _bridge.AsyncioLock()
        self._tails: dict[str, _bridge.AsyncioTask[None]] = {}
        self._tasks: set[_bridge.AsyncioTask[None]] = set()
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
        task = _bridge.spawn_asyncio(self._process(request, before))
        self._tasks.add(task)
        for key in keys:
            self._tails[key] = task

        def done(finished: _bridge.AsyncioTask[None]) -> None:
            self._tasks.discard(finished)
            self._slots.release()
            for key in keys:
                if self._tails.get(key) is finished:
                    del self._tails[key]
            if not finished.cancelled() and finished.exception() is not None:
                self._failure = self._failure or finished.exception()

        task.add_done_callback(done)

    async def _process(
        self, request: model_pb.JoinRequest, before: list[_bridge.AsyncioTask[None]]
    ) -> None:
        if before:
            # asyncio.wait, not gather: our cancellation must not cancel the predecessors.
            await _bridge.asyncio_wait(before)
        response = await self._host.handle(request, self._invoke)
        await self._send(response)

    async def _send(self, response: model_pb.JoinResponse) -> None:
        data = encode_join_response(response)
        async with self._send_lock:
            await _h2fast.send_server_message(self._stream, data)

    async def _drain(self) -> None:
        while self._tasks:
            await _bridge.asyncio_wait(list(self._tasks))
