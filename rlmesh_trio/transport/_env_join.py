"""The env server's Join sessions (asyncio side).

What 0.1.0 clients rely on (protocol notes §3.1, §3.5, §8, §9): Join sends its
response headers at once (a tonic client waits for them before its first
request); one Join at a time (FAILED_PRECONDITION for a second); every
response echoes its request's id and carries ``endpoint_total_ns``; the
stream ends OK after Close and after a non-recoverable error; a half-close or
a cancelled stream lets in-flight env calls finish and drops the session's
leftover episodes before the slot frees; a server that stops ends an open
session with UNAVAILABLE. Join messages travel as bytes (:mod:`rlmesh_trio.wire._env_codec`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import grpclib.server
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from .._envhost import HostReply
from .._wire import env_pb
from ..wire._env_codec import decode_join_request, encode_join_response
from . import _server_loop as aio
from ._server_net import decode_or_refuse

if TYPE_CHECKING:
    from ._env_server import EnvServer, EnvWorkers

__all__ = ["JoinSession"]

log = logging.getLogger("rlmesh_trio.transport.env_server")

STOPPING_MESSAGE = "the env server is shutting down"


class JoinSession:
    """One Join stream: read requests, run them through the host, answer by request id."""

    def __init__(self, server: EnvServer, stream: grpclib.server.Stream[Any, Any]) -> None:
        self._stopping = server._is_stopping
        self._host = server.host
        self._stream = stream
        self._workers = server._workers
        self._loop = aio.running_loop()
        self.released = aio.AsyncioEvent()  # the session's slot is free again
        self._inflight: set[aio.AsyncioTask[None]] = set()
        self._send_lock = aio.AsyncioLock()
        self._finished = aio.AsyncioEvent()
        self._ended = False  # a Close reply or a non-recoverable error went out
        self._closed_by_request = False
        # A request the server could not read (oversized, undecodable), or the server
        # stopping: the stream ends with this status once in-flight requests are answered.
        self._end_error: GRPCError | None = None

    async def run(self) -> None:
        """Serve the stream until Close, an error, a half-close or :meth:`end_for_shutdown`.

        Raises:
            GRPCError: the status the stream ends with when it does not end OK.
        """
        reader = self._loop.create_task(self._read())
        try:
            await self._finished.wait()
        finally:
            reader.cancel()
            await self._drain(reader)
            if not self._closed_by_request:
                self._host.end_session()
        if self._end_error is not None and not self._ended:
            raise self._end_error

    def end_for_shutdown(self) -> None:
        """The server is stopping: end this stream with UNAVAILABLE once in-flight calls end."""
        if self._end_error is None:
            self._end_error = GRPCError(Status.UNAVAILABLE, STOPPING_MESSAGE)
        self._finished.set()

    async def _drain(self, reader: aio.AsyncioTask[None]) -> None:
        """Wait for in-flight env calls (they cannot be interrupted) before the slot frees.

        A client that drops the connection gets this handler cancelled, possibly
        more than once; we keep waiting regardless, so a reconnect is refused
        until the env is really idle (as 0.1.0 does). Stopping the server is
        bounded, so this cannot hang a shutdown.
        """
        pending = {*self._inflight, reader}
        drained = aio.spawn(aio.asyncio_wait(pending))
        while not drained.done():
            try:
                await aio.asyncio_shield(drained)
            except aio.AsyncioCancelledError:
                if self._stopping():
                    raise

    def abandon(self) -> None:
        """Stop waiting for in-flight env calls (stopping, past the drain bound): their
        tasks are cancelled; the calls themselves finish on their threads, unanswered."""
        for task in list(self._inflight):
            task.cancel()

    async def _read(self) -> None:
        workers = self._workers
        try:
            while not self._ended:
                data = await self._stream.recv_message()
                if data is None:
                    break  # half-close: answer what is in flight, then end
                received = time.perf_counter_ns()
                request = decode_or_refuse(decode_join_request, data)
                if workers is None:
                    # Inline (serve(env_thread="loop")): one request at a time, in order.
                    await self._answer(request, self._host.handle(request), received)
                else:
                    self._spawn(workers, request, received)
        except GRPCError as exc:
            log.info("env Join stream refused a request: %s: %s", exc.status.name, exc.message)
            self._end_error = exc
        except (ConnectionError, OSError, StreamTerminatedError) as exc:
            log.debug("env Join stream read ended: %r", exc)
        finally:
            if self._inflight:
                await aio.asyncio_wait(set(self._inflight))
            self._finished.set()

    def _spawn(self, workers: EnvWorkers, request: env_pb.JoinRequest, received: int) -> None:
        # Admission fixes the request's place in line, so it happens here, in arrival order.
        ticket = self._host.admit(request)
        task = self._loop.create_task(self._process(workers, request, ticket, received))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _process(
        self, workers: EnvWorkers, request: env_pb.JoinRequest, ticket: Any, received: int
    ) -> None:
        host = self._host
        try:
            reply = await workers.submit(host.run, ticket)
        except BaseException:
            host.discard(ticket)
            raise
        await self._answer(request, reply, received)

    async def _answer(
        self, request: env_pb.JoinRequest, reply: HostReply | None, received: int
    ) -> None:
        if reply is None or self._ended:
            return
        response = reply.response
        response.request_id = request.request_id
        response.user_ns = reply.user_ns
        response.decode_ns = reply.decode_ns
        response.encode_ns = reply.encode_ns
        response.queue_ns = reply.queue_ns
        if reply.end_stream:
            self._ended = True
            self._closed_by_request = response.close is not None
        response.endpoint_total_ns = time.perf_counter_ns() - received
        try:
            async with self._send_lock:
                await self._stream.send_message(encode_join_response(response))
        except Exception as exc:  # the stream is gone (h2 StreamClosedError, reset, ...)
            log.debug("env Join stream send failed: %r", exc)
            self._ended = True
            self._finished.set()
            return
        if reply.end_stream:
            self._finished.set()
