"""``ModelServer``: a Python policy served over gRPC (rlmesh-wire-v1 ``ModelService``).

The protocol logic lives in :class:`~rlmesh_trio._modelhost.ModelHost`. On a Join
stream a sync policy answers in arrival order (which ``concurrent_predict`` allows);
async or threaded policies take up to ``max_concurrency`` requests at a time, answered
in completion order while requests for one ``env_id`` keep their order.
"""

from __future__ import annotations

import contextlib
import functools
import ssl as ssl_module
import time
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any, ClassVar, TypeVar, cast

import betterproto2
import trio

from ... import _wire as wire
from ..._modelhost import (
    Invoke,
    ModelFault,
    ModelHost,
    PolicyFn,
    ThreadedInvoker,
    answer_row,
    inline_invoke,
)
from ..._protocol import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, model_pb
from ..._wire._model_parts import encode_predict_reply, read_predict
from .._handshake import MODEL_COMPONENT
from ._base import ServerBase
from ._call import ServerCall
from ._net import CODEC, THREAD_DECODE_BYTES, decode_request
from ._thread import serving_in_thread

__all__ = ["ModelServer", "serve_model"]

T = TypeVar("T")

DEFAULT_MAX_CONCURRENCY = 32
DRAIN_TIMEOUT = 5.0


class ModelServer(ServerBase):
    """Serve ``policy`` (anything :func:`rlmesh_trio.policy` accepts) on ``address`` over gRPC.

    Sync policies run inline in the server's Trio run unless ``threaded=True``
    (then in a Trio worker thread, one call at a time); async policies run as
    Trio tasks of that run. Ways to run it: blocking :meth:`serve`; ``start()`` or ``with``
    from code that is not Trio; ``serve_model`` or ``nursery.start(server.run)``.

    Raises:
        TypeError: ``policy`` is nothing :func:`rlmesh_trio.policy` accepts, or
            ``limits`` is not a ``ServerLimits``.
        ValueError: ``max_concurrency`` below 1.
        InvalidSpec: a bad ``address``.
    """

    _kind = "model"
    _grpc_service = "rlmesh.model.v1.ModelService"
    _messages: ClassVar[Any] = model_pb
    _component = MODEL_COMPONENT
    _shutdown_refusal = "remote shutdown is disabled for this model endpoint"
    _blank_shutdown_reason = "remote shutdown"

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
        limits: wire.ServerLimits | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        super().__init__(
            address,
            token=token,
            ssl=ssl,
            allow_remote_shutdown=allow_remote_shutdown,
            limits=limits,
        )
        self._host = (
            policy if isinstance(policy, ModelHost) else ModelHost(policy, editions=editions)
        )
        self._threaded = threaded
        self._max_concurrency = max_concurrency
        # Two statements, not a conditional expression: older mypy joins its arms to object.
        self._invoke_in_trio: Invoke = inline_invoke
        if threaded:
            self._invoke_in_trio = ThreadedInvoker()

    @property
    def inline(self) -> bool:
        """True when every request can be answered inline, without a Trio hop."""
        return not self._threaded and not self._host.policy.is_async

    def _close_bound(self) -> float:
        """Stopping cancels in-flight requests and closes connections, bounded."""
        return DRAIN_TIMEOUT

    # -- the serving run ---------------------------------------------------------------------

    async def _handshake(self, message: model_pb.HandshakeRequest) -> model_pb.HandshakeResponse:
        base = self._handshake_reply(
            message.base,
            capabilities={CAP_CONCURRENT_PREDICT: "true"},
            editions=self._host.editions,
        )
        return model_pb.HandshakeResponse(base=base)

    async def _join(self, call: ServerCall) -> None:
        # Pitfall 1: 0.1.0 clients wait for the response headers before sending anything.
        call.send_headers()
        if self.inline:
            await self._join_inline(call)
        else:
            await _ConcurrentJoin(self, call).run()

    async def _join_inline(self, call: ServerCall) -> None:
        host = self._host
        invoke = self._invoke_policy
        decode, encode = CODEC.decode, CODEC.encode
        # While this task waits for the next request the connection's reader answers
        # it in its own turn (see _serve_now); what it declines comes here.
        call.inline = functools.partial(self._serve_now, call)
        try:
            while (data := await call.recv()) is not None:
                request = (
                    decode(data, model_pb.JoinRequest)
                    if len(data) < THREAD_DECODE_BYTES
                    else await decode_request(data, model_pb.JoinRequest)
                )
                response = await host.handle(request, invoke)
                await call.send(encode(response, model_pb.JoinResponse))
                if response.close is not None:
                    return  # Close ends the stream with status OK, as 0.1.0 does
        finally:
            call.inline = None

    def _serve_now(self, call: ServerCall, data: bytes) -> bool:
        """Answer one request in the reader's turn (``call.inline``); ``False`` for what
        the stream's task must do: a large request (decoded on a worker thread), one
        that does not decode (the task raises the error), a Close (it ends the
        stream), and any request while a policy function is ``async def``.

        Raises:
            GrpcError: a reply over the size limit (the task raises it from recv()).
            CallLost: the stream is gone.
        """
        host = self._host
        if len(data) >= THREAD_DECODE_BYTES or not host.synchronous:
            return False
        reply = self._answer_row(data)
        if reply is not None:
            call.send_now(CODEC.checked(reply))
            return True
        try:
            request = CODEC.decode(data, model_pb.JoinRequest)
        except wire.GrpcError:
            return False
        if request.close is not None:
            return False
        response = _completed(host.handle(request, self._invoke_policy))
        call.send_now(CODEC.encode(response, model_pb.JoinResponse))
        return True

    def _answer_row(self, data: bytes) -> bytes | None:
        """The reply to a one-row predict, read and written from its parts (the step of
        every route: no message objects, no coroutine); ``None`` for what
        :meth:`ModelHost.handle` must answer (its replies are the same)."""
        started = time.perf_counter_ns()
        parts = read_predict(data) if CODEC.fits(data) else None
        if parts is None or self._threaded:
            return None
        adapter = self._host.adapters.get(parts.env_id)
        if adapter is None:
            return None
        answered = answer_row(adapter, parts.observation)
        if answered is None:
            return None
        frame, decode_ns, user_ns, encode_ns = answered
        total = time.perf_counter_ns() - started
        if isinstance(frame, ModelFault):
            response = model_pb.JoinResponse(
                request_id=parts.request_id, error=frame.to_proto(), endpoint_total_ns=total
            )
            return CODEC.encode(response, model_pb.JoinResponse)
        return encode_predict_reply(parts, frame, total, (decode_ns, user_ns, encode_ns))

    async def _invoke_policy(self, fn: PolicyFn, arg: Any) -> Any:
        """Run a policy function: inline when it is a plain sync call, otherwise as
        ``threaded`` says (async policies are awaited here, in the server's run).

        Raises:
            What the function raised.
        """
        if not fn.is_async and not self._threaded:
            return fn.fn(arg)
        return await self._invoke_in_trio(fn, arg)


def _completed(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the model host with synchronous policy
    functions run inline) to its end, here and now.

    Raises:
        RuntimeError: it suspended after all (a bug: nothing was awaited for it).
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("the model host suspended while answering inline")


def _ordering_keys(request: model_pb.JoinRequest) -> list[str]:
    """The env_ids whose request order this request must keep."""
    name, body = betterproto2.which_one_of(request, "kind")
    body = cast(Any, body)
    if name == "grouped_predict":
        return sorted({g.context.env_id for g in body.groups if g.context is not None})
    context = getattr(body, "context", None)
    return [context.env_id] if context is not None and context.env_id else []


class _ConcurrentJoin:
    """One Join stream whose requests run concurrently (async or threaded policies):
    up to ``max_concurrency`` at once, answered in completion order, each waiting
    for the earlier requests of its env_ids."""

    def __init__(self, server: ModelServer, call: ServerCall) -> None:
        self._host = server._host
        self._invoke = server._invoke_policy
        self._call = call
        self._slots = trio.Semaphore(server._max_concurrency, max_value=server._max_concurrency)
        self._tails: dict[str, trio.Event] = {}
        self._failure: BaseException | None = None

    async def run(self) -> None:
        """Raises: what a request's handling raised (the stream ends with it)."""
        call = self._call
        async with trio.open_nursery() as nursery:
            while (data := await call.recv()) is not None:
                if self._failure is not None:
                    break
                request = await decode_request(data, model_pb.JoinRequest)
                if request.close is not None:
                    await self._drain()
                    response = await self._host.handle(request, self._invoke)
                    await self._send(response)
                    nursery.cancel_scope.cancel()
                    return
                await self._slots.acquire()
                self._spawn(nursery, request)
            await self._drain()
        if self._failure is not None:
            raise self._failure

    def _spawn(self, nursery: trio.Nursery, request: model_pb.JoinRequest) -> None:
        keys = _ordering_keys(request)
        before = [self._tails[k] for k in keys if k in self._tails]
        done = trio.Event()
        for key in keys:
            self._tails[key] = done
        nursery.start_soon(self._process, request, before, keys, done)

    async def _process(
        self,
        request: model_pb.JoinRequest,
        before: list[trio.Event],
        keys: list[str],
        done: trio.Event,
    ) -> None:
        try:
            for earlier in before:
                await earlier.wait()
            response = await self._host.handle(request, self._invoke)
            await self._send(response)
        except Exception as exc:
            self._failure = self._failure or exc
        finally:
            self._slots.release()
            for key in keys:
                if self._tails.get(key) is done:
                    del self._tails[key]
            done.set()

    async def _send(self, response: model_pb.JoinResponse) -> None:
        await self._call.send(CODEC.encode(response, model_pb.JoinResponse))

    async def _drain(self) -> None:
        # Every slot back: every spawned request has finished.
        limit = self._slots.max_value
        assert limit is not None
        for _ in range(limit):
            await self._slots.acquire()
        for _ in range(limit):
            self._slots.release()


@contextlib.asynccontextmanager
async def serve_model(
    policy: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[ModelServer]:
    """Serve ``policy`` over gRPC from a Trio program; yields the server once it is listening.

    ``options`` are :class:`ModelServer`'s. The server runs on a thread of its
    own with a ``trio.run`` of its own. An async (Trio) policy runs in that
    run, not the caller's, so it must not wait on the caller's Trio objects. Thread
    safety: the policy is called from threads other than the caller's.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server, cancelling in-flight requests; the caller waits
    shielded and bounded for its thread, so it cannot hang.

    Raises:
        TypeError: ``policy`` is nothing :func:`rlmesh_trio.policy` accepts, or an
            option is unknown or mistyped (``limits`` not a ``ServerLimits``).
        ValueError: ``max_concurrency`` below 1.
        InvalidSpec: a bad address.
        OSError: the server cannot listen (the port is taken, say).
        RuntimeError: the server's thread ended before listening, raising nothing;
            or entered outside a Trio run (Trio's "must be called from async context").
        trio.Cancelled: the caller's scope was cancelled (while the server started,
            it is stopped first).
        Exception: on leaving the block, what the server raised while serving or
            stopping (only logged if the body raised first).
    """
    server = ModelServer(policy, address, **options)
    async with serving_in_thread(server):
        yield server
