"""The model server's gRPC service and its Join streams (asyncio side, grpclib's public API).

* Handshake: generation check with 0.1.0's texts, our editions and capabilities.
* Join: initial metadata sent at once (0.1.0 clients wait for it before their
  first message), many Join streams, request ids echoed. A sync policy runs
  inline on the event loop, one request after another (answers then come in
  arrival order, which ``concurrent_predict`` allows). Async or threaded
  policies are processed concurrently, up to ``max_concurrency`` requests per
  stream, answered in completion order while requests for the same
  ``env_id`` keep their order.
* Shutdown: refused unless ``allow_remote_shutdown``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import betterproto2
import grpclib.const
import grpclib.server

from .._wire import CAP_CONCURRENT_PREDICT, model_pb
from ..wire._model_codec import decode_join_request, encode_join_response
from . import _server_loop as aio
from ._handshake import MODEL_COMPONENT
from ._server_base import decode_or_refuse, handshake_reply, raw_join

if TYPE_CHECKING:
    from ._model_server import ModelServer

__all__ = ["ModelService"]

SHUTDOWN_DISABLED = "remote shutdown is disabled for this model endpoint"
_JOIN = "/rlmesh.model.v1.ModelService/Join"


def _ordering_keys(request: model_pb.JoinRequest) -> list[str]:
    """The env_ids whose request order this request must keep."""
    name, body = betterproto2.which_one_of(request, "kind")
    body = cast(Any, body)
    if name == "grouped_predict":
        return sorted({g.context.env_id for g in body.groups if g.context is not None})
    context = getattr(body, "context", None)
    return [context.env_id] if context is not None and context.env_id else []


class ModelService(model_pb.ModelServiceBase):
    """The generated service base, with Join served from the raw stream (asyncio side)."""

    def __init__(self, server: ModelServer) -> None:
        self._server = server
        self._host = server.host

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        return raw_join(super().__mapping__(), _JOIN, self._join)

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
        reply = self._server.shutdown_reply(
            message.base, refusal=SHUTDOWN_DISABLED, blank_reason="remote shutdown"
        )
        return model_pb.ShutdownResponse(base=reply)

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
        recv, send = stream.recv_message, stream.send_message  # not async for: one frame less
        while (data := await recv()) is not None:
            response = await host.handle(decode_or_refuse(decode_join_request, data), invoke)
            await send(encode_join_response(response))
            if response.close is not None:
                return  # Close ends the stream with status OK, as 0.1.0 does


class _ConcurrentJoin:
    """One Join stream whose requests run concurrently (async or threaded policies)."""

    def __init__(self, server: ModelServer, stream: grpclib.server.Stream[Any, Any]) -> None:
        self._host = server.host
        self._invoke = server.asyncio_invoke()
        self._stream = stream
        self._slots = aio.AsyncioSemaphore(server.max_concurrency)
        self._send_lock = aio.AsyncioLock()
        self._tails: dict[str, aio.AsyncioTask[None]] = {}
        self._tasks: set[aio.AsyncioTask[None]] = set()
        self._failure: BaseException | None = None

    async def run(self) -> None:
        try:
            async for data in self._stream:
                request = decode_or_refuse(decode_join_request, data)
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
        data = encode_join_response(response)
        async with self._send_lock:
            await self._stream.send_message(data)

    async def _drain(self) -> None:
        while self._tasks:
            await aio.asyncio_wait(list(self._tasks))
