"""``ModelServer``: a Python policy served over gRPC (rlmesh-wire-v1 ``ModelService``).

The protocol logic lives in :class:`~rlmesh_trio._modelhost.ModelHost`. On a Join
stream a sync policy answers in arrival order (which ``concurrent_predict`` allows);
async or threaded policies take up to ``max_concurrency`` requests at a time, answered
in completion order while requests for one ``env_id`` keep their order.
"""

from __future__ import annotations

import contextlib
import ssl as ssl_module
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, ClassVar, cast

import betterproto2
import grpclib.server

from .._modelhost import Invoke, ModelHost, PolicyFn, ThreadedInvoker, inline_invoke
from .._wire import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, model_pb
from . import _server_loop as aio
from ._handshake import MODEL_COMPONENT
from ._server_base import ServerBase

__all__ = ["ModelServer", "serve_model"]

DEFAULT_MAX_CONCURRENCY = 32
DRAIN_TIMEOUT = 5.0


class ModelServer(ServerBase):
    """Serve ``policy`` (anything :func:`rlmesh_trio.policy` accepts) on ``address`` over gRPC.

    Sync policies run inline on the server's event loop unless ``threaded=True``
    (then in a Trio worker thread, one call at a time); async policies run as
    Trio tasks. Ways to run it: blocking :meth:`serve`; ``start()`` or ``with``
    from code that is not Trio; ``serve_model`` or ``nursery.start(server.run)``.

    Raises:
        ValueError: ``max_concurrency`` below 1.
        InvalidSpec: a bad ``address``.
    """

    kind = "model"
    service = "rlmesh.model.v1.ModelService"
    messages: ClassVar[Any] = model_pb
    component = MODEL_COMPONENT
    shutdown_refusal = "remote shutdown is disabled for this model endpoint"
    blank_shutdown_reason = "remote shutdown"

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
        # Two statements, not a conditional expression: older mypy joins its arms to object.
        self._invoke_in_trio: Invoke = inline_invoke
        if threaded:
            self._invoke_in_trio = ThreadedInvoker()
        self._guest: aio.TrioGuest | None = None  # async and threaded policies run here

    @property
    def inline(self) -> bool:
        """True when every request can be answered inline, without a Trio hop."""
        return not self.threaded and not self.host.policy.is_async

    def close_bound(self) -> float:
        """Stopping cancels in-flight requests and closes connections, bounded."""
        return DRAIN_TIMEOUT

    # -- asyncio side ----------------------------------------------------------------------

    async def _serve_plain_asyncio(self, announce: Callable[[], None]) -> None:
        if self.inline:
            await super()._serve_plain_asyncio(announce)
            return
        async with aio.trio_guest() as guest:
            self._guest = guest
            try:
                await super()._serve_plain_asyncio(announce)
            finally:
                self._guest = None

    async def _handshake(self, message: model_pb.HandshakeRequest) -> model_pb.HandshakeResponse:
        base = self._handshake_reply(
            message.base, capabilities={CAP_CONCURRENT_PREDICT: "true"}, editions=self.host.editions
        )
        return model_pb.HandshakeResponse(base=base)

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        # Pitfall 1: 0.1.0 clients wait for the response headers before sending anything.
        await stream.send_initial_metadata()
        if self.inline:
            await self._join_inline(stream)
        else:
            await _ConcurrentJoin(self, stream).run()

    async def _join_inline(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        host = self.host
        invoke = self._invoke_policy
        recv, send = stream.recv_message, stream.send_message  # not async for: one frame less
        while (request := await recv()) is not None:
            response = await host.handle(request, invoke)
            await send(response)
            if response.close is not None:
                return  # Close ends the stream with status OK, as 0.1.0 does

    async def _invoke_policy(self, fn: PolicyFn, arg: Any) -> Any:
        """Run a policy function from the asyncio side: inline when it is a plain sync
        call, otherwise in the Trio guest run (async policies, worker threads).

        Raises:
            RuntimeError: the Trio guest run is not up; or what the function raised.
        """
        if not fn.is_async and not self.threaded:
            return fn.fn(arg)
        guest = self._guest
        if guest is None:
            raise RuntimeError("the model server's Trio run is not up")
        return await guest.call(self._invoke_in_trio, fn, arg)


def _ordering_keys(request: model_pb.JoinRequest) -> list[str]:
    """The env_ids whose request order this request must keep."""
    name, body = betterproto2.which_one_of(request, "kind")
    body = cast(Any, body)
    if name == "grouped_predict":
        return sorted({g.context.env_id for g in body.groups if g.context is not None})
    context = getattr(body, "context", None)
    return [context.env_id] if context is not None and context.env_id else []


class _ConcurrentJoin:
    """One Join stream whose requests run concurrently (async or threaded policies)."""

    def __init__(self, server: ModelServer, stream: grpclib.server.Stream[Any, Any]) -> None:
        self._host = server.host
        self._invoke = server._invoke_policy
        self._stream = stream
        self._slots = aio.AsyncioSemaphore(server.max_concurrency)
        self._send_lock = aio.AsyncioLock()
        self._tails: dict[str, aio.AsyncioTask[None]] = {}
        self._tasks: set[aio.AsyncioTask[None]] = set()
        self._failure: BaseException | None = None

    async def run(self) -> None:
        try:
            async for request in self._stream:
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
        task = aio.spawn(self._process(request, before))
        self._tasks.add(task)
        for key in keys:
            self._tails[key] = task

        def done(finished: aio.AsyncioTask[None]) -> None:
            self._tasks.discard(finished)
            self._slots.release()
            for key in keys:
                if self._tails.get(key) is finished:
                    del self._tails[key]
            if not finished.cancelled() and finished.exception() is not None:
                self._failure = self._failure or finished.exception()

        task.add_done_callback(done)

    async def _process(
        self, request: model_pb.JoinRequest, before: list[aio.AsyncioTask[None]]
    ) -> None:
        if before:
            # asyncio.wait, not gather: our cancellation must not cancel the predecessors.
            await aio.asyncio_wait(before)
        response = await self._host.handle(request, self._invoke)
        await self._send(response)

    async def _send(self, response: model_pb.JoinResponse) -> None:
        async with self._send_lock:
            await self._stream.send_message(response)

    async def _drain(self) -> None:
        while self._tasks:
            await aio.asyncio_wait(list(self._tasks))


@contextlib.asynccontextmanager
async def serve_model(
    policy: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[ModelServer]:
    """Serve ``policy`` over gRPC from a Trio program; yields the server once it is listening.

    ``options`` are :class:`ModelServer`'s. The server runs on a thread of its
    own with a plain asyncio loop, so the caller's run needs no asyncio. An
    async (Trio) policy runs in a Trio guest run hosted by that loop, not the
    caller's run, so it must not wait on the caller's Trio objects. Thread
    safety: the policy is called from threads other than the caller's.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server, cancelling in-flight requests; the caller waits
    shielded and bounded for its thread, so it cannot hang.

    Raises:
        InvalidSpec: a bad address.
        OSError: the server cannot listen (the port is taken, say).
    """
    server = ModelServer(policy, address, **options)
    async with aio.serving_in_thread(server):
        yield server
