"""One accepted connection of a server, driven from Trio over the I/O-free server core.

The connection's reader feeds the core at most :data:`TURN_BYTES` at a time
and yields between chunks, fewer bytes a turn when they cost more (HEADERS
and resets), so a flood on one connection cannot stall the others; every
limit of :class:`~rlmesh_trio._wire.ServerLimits` that needs a clock (the
handshake deadline, the idle timeout) is kept here.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Protocol

import trio

from ... import _wire as wire
from ..._protocol import MAX_MESSAGE_BYTES
from ..._wire._h2server import ServerCore
from ..._wire._limits import ByteBudget, RateBudget
from .._stream import ByteStream
from .._writing import CLOSED_ERRORS, SocketWriter
from ._call import CallLost, Handler, ServerCall

__all__ = ["RECEIVE_SIZE", "ServerConnection", "Service"]

log = logging.getLogger("rlmesh_trio.transport.server")

#: Bytes of one read fed to the core before the reader yields to other connections:
#: the most, for cheap bytes; a turn that took over ``TURN_SECONDS`` shrinks the next
#: ones (to ``MIN_TURN_BYTES`` at least: one HEADERS frame and its reset fit).
TURN_BYTES = 16384
TURN_SECONDS = 0.0005
MIN_TURN_BYTES = 512
COSTLY_TURN_YIELDS = 3
#: Bytes a call may have queued for a client that is not reading before send waits.
SEND_QUEUE_BYTES = 4 * 1024 * 1024
STOPPING = "the server is shutting down"
#: The most one read of a client's bytes takes (its turns cut it smaller still).
RECEIVE_SIZE = 65536
#: How long, and for how many bytes, a closing connection reads what its client still
#: sends before the socket is closed (see ``ServerConnection._linger``).
LINGER_SECONDS = 1.0
LINGER_BYTES = 1 << 20


class ServerConnection:
    """One client connection: its core, its calls, its reader, writer and timers."""

    def __init__(
        self,
        service: Service,
        stream: ByteStream,
        *,
        handshake_deadline: float | None = None,
        preface_sent: bytes = b"",
    ) -> None:
        self._service = service
        self._preface_sent = preface_sent  # our SETTINGS, already written at accept
        self._stream = stream
        limits = service.limits
        self._limits = limits
        self.core = ServerCore(
            limits, service.budget, max_message_bytes=service.max_message_bytes()
        )
        self.core.shared_resets = service.resets
        self._calls: dict[int, ServerCall] = {}
        self._write_wanted = trio.Event()
        self._writer = SocketWriter(
            self.core,
            stream,
            self,
            lose=self._lose,
            wake=self._wake_writer,
            checkpoints=False,
        )
        # Set after each read by the reader, for a sender waiting for the client to
        # read (made only when one waits: most reads have no such sender).
        self._drained: trio.Event | None = None
        self._preface_seen = trio.Event()
        # When the TLS handshake and the client's preface must be done by (from accept).
        self._handshake_deadline = (
            handshake_deadline
            if handshake_deadline is not None
            else trio.current_time() + limits.handshake_timeout
        )
        self._idle_since = trio.current_time()
        self._closing = False
        self._turn = TURN_BYTES  # see _process_in_turns
        self.lost: str | None = None
        self.scope = trio.CancelScope()

    # ---- the life of the connection ------------------------------------------

    async def run(self) -> None:
        """Serve the connection until it ends. Never raises for the client's faults.

        Cancellation: ends the connection at once (the socket is closed).
        """
        try:
            with self.scope:
                if await self._handshake():
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._write_loop)
                        nursery.start_soon(self._watch_idle)
                        await self._read_loop()
                        nursery.cancel_scope.cancel()
        except Exception:
            log.exception("a server connection failed")
        finally:
            self._lose("connection closed")
            self._writer.write_last()  # what is still queued (trailers, GOAWAY), best effort
            self.core.dispose()
            with trio.CancelScope(shield=True):
                await self._linger()
                await self._stream.aclose()

    async def _linger(self) -> None:
        """End the connection gracefully before closing the socket: our FIN after the
        last frame, then what the client still sends read and dropped until it closes
        too (at most :data:`LINGER_SECONDS` and :data:`LINGER_BYTES`).

        Closing a socket with bytes unread, or one the client still writes to (its
        half-close, a WINDOW_UPDATE, its own GOAWAY in flight), makes the kernel answer
        with a TCP reset, and a reset throws away whatever of ours the client had not
        read yet: the stream's trailers, the GOAWAY. The client then sees a
        "connection reset" where the session had ended cleanly (rlmesh 0.1.0 logs
        ``join stream error from env server ... ConnectionReset``). A client that
        already closed ends this at once.
        """
        stream = self._stream
        drained = 0
        with trio.move_on_after(LINGER_SECONDS):
            try:
                await stream.send_eof()
                while drained < LINGER_BYTES:
                    await stream.wait_receivable()
                    try:
                        data = stream.receive_now()
                    except BlockingIOError:
                        continue
                    if not data:
                        return
                    drained += len(data)
            except CLOSED_ERRORS:
                return

    async def _handshake(self) -> bool:
        """TLS (when configured) and the client's preface, within the handshake deadline."""
        with trio.move_on_at(self._handshake_deadline):
            try:
                await self._stream.handshake()
            except CLOSED_ERRORS:
                return False
            self.core.initiate(self._preface_sent)
            await self.flush()
            while not self.core.preface_received:
                if not await self._read_once():
                    return False
            return self.lost is None
        log.debug("a client missed the handshake deadline")
        return False

    async def _read_loop(self) -> None:
        # :meth:`_read_once` written out in the loop, since it runs once per request
        # (a coroutine fewer per request). The stream is waited on first and read once
        # it is readable: the next request is rarely there already, so trying first
        # would cost a failed read per request.
        wait_receivable = self._stream.wait_receivable
        receive_now = self._stream.receive_now
        while self.lost is None:
            try:
                await wait_receivable()
                data = receive_now()
            except BlockingIOError:
                continue
            except CLOSED_ERRORS:
                data = b""
            if not data:
                self._lose("connection closed")
                return
            if len(data) <= self._turn:
                if not self._process(data):
                    return
            elif not await self._process_in_turns(data):
                return

    async def _receive(self) -> bytes:
        """The next bytes from the client (``b""``: it closed)."""
        stream = self._stream
        while True:
            await stream.wait_receivable()
            try:
                return stream.receive_now()
            except BlockingIOError:
                continue

    async def _read_once(self) -> bool:
        try:
            data = await self._receive()
        except CLOSED_ERRORS:
            data = b""
        if not data:
            self._lose("connection closed")
            return False
        if len(data) <= self._turn:
            return self._process(data)
        return await self._process_in_turns(data)

    async def _process_in_turns(self, data: bytes) -> bool:
        """Feed ``data`` to the core a turn at a time, yielding between turns.

        A turn is sized by what the client's bytes cost, not by their count: 16 KiB of
        DATA is a copy, 16 KiB of HEADERS and resets (a rapid reset) is a hundred
        streams through h2 and HPACK, milliseconds in which no other connection is
        served. Each turn's time sets the next one's size (towards ``TURN_SECONDS``).
        """
        start = 0
        while start < len(data):
            size = self._turn
            began = time.perf_counter()
            if not self._process(data[start : start + size]):
                return False
            start += size
            took = time.perf_counter() - began
            if took > TURN_SECONDS:
                self._turn = max(MIN_TURN_BYTES, int(size * TURN_SECONDS / took))
                # The other connections' requests take a few task hops each (read,
                # handler, write): let them make those before this one's next turn.
                for _ in range(COSTLY_TURN_YIELDS):
                    await trio.lowlevel.checkpoint()
            elif size < TURN_BYTES:
                self._turn = min(TURN_BYTES, size * 2)
            await trio.lowlevel.checkpoint()
        return True

    def _process(self, data: bytes) -> bool:
        try:
            events = self.core.receive_data(data)
        except wire.ProtocolFailure as exc:
            log.debug("closing a connection: %s", exc)
            self._writer.write_last()
            self._lose("protocol error")
            return False
        calls = self._calls
        for event in events:
            if type(event) is wire.MessageReceived:  # the hot case
                call = calls.get(event.stream_id)
                if call is not None:
                    call.deliver(event.data)
                else:
                    self.core.release(len(event.data) + 5)
            else:
                self._dispatch(event)
        # What the calls served inline answered (and any control frames) goes out
        # now, in one write, rather than after a trip to the writer task.
        if self.core.wants_write and not self._writer.write_now():
            self._write_wanted.set()
        drained = self._drained
        if drained is not None:
            self._drained = None
            drained.set()
        return True

    def _dispatch(self, event: wire.Event) -> None:
        if isinstance(event, wire.RequestReceived):
            self._open_call(event.stream_id, event.headers)
            return
        call = self._calls.get(getattr(event, "stream_id", 0))
        if isinstance(event, wire.RequestEnded):
            if call is not None:
                call.half_close()
        elif isinstance(event, wire.MessageRefused):
            if call is not None:
                call.refuse(event.status, event.message)
        elif isinstance(event, wire.StreamReset):
            if call is not None:
                self._calls.pop(event.stream_id, None)
                self.release(call.drop_inbox())
                call.lose("reset by the client")
        elif isinstance(event, wire.ConnectionTerminated):
            if not self._calls:
                self._lose("the client went away")

    def _open_call(self, stream_id: int, headers: list[tuple[str, str]]) -> None:
        metadata = dict(headers)
        path = metadata.get(":path", "")
        service = self._service
        handler = service.routes.get(path)
        core = self.core
        if handler is None:
            core.finish(stream_id, wire.GrpcStatus.UNIMPLEMENTED, f"Method not found: {path}")
        elif not service.token_ok(path, metadata):
            core.finish(stream_id, wire.GrpcStatus.UNAUTHENTICATED, service.token_refusal)
            handler = None
        if handler is None:
            self._write_wanted.set()
            return
        call = ServerCall(self, stream_id, path, metadata)
        self._calls[stream_id] = call
        # On the server's nursery: a call outlives its connection until its handler
        # notices (an env call in flight must finish before the env is free again).
        service.nursery.start_soon(self._serve_call, handler, call)

    async def _serve_call(self, handler: Handler, call: ServerCall) -> None:
        status, message = wire.GrpcStatus.OK, None
        try:
            with call.scope:
                await handler(call)
            if call.scope.cancelled_caught:
                status, message = wire.GrpcStatus.UNAVAILABLE, STOPPING
        except wire.GrpcError as exc:
            status, message = exc.status, exc.message
        except CallLost:
            pass
        except Exception:
            log.exception("%s handler failed", call.path)
            status, message = wire.GrpcStatus.UNKNOWN, "Internal Server Error"
        finally:
            call.finish(status, message)
            if self._calls.pop(call.stream_id, None) is not None:
                self.release(call.drop_inbox())
            if not self._calls:
                self._idle_since = trio.current_time()
        await self.flush()

    async def _watch_idle(self) -> None:
        idle = self._limits.idle_timeout
        while True:
            await trio.sleep_until(self._idle_since + idle)
            now = trio.current_time()
            if self._calls:
                self._idle_since = now
            elif now >= self._idle_since + idle:
                self.goaway()
                await self.flush()
                self._lose("idle")
                return

    # ---- what calls and the server ask for -----------------------------------

    def release(self, size: int) -> None:
        if size:
            self.core.release(size)

    def send_headers(self, stream_id: int) -> None:
        self.core.send_headers(stream_id)
        self._write_wanted.set()

    def queue_message(self, call: ServerCall, payload: bytes) -> None:
        """Queue one message of ``call`` (written by the next flush).

        Raises:
            CallLost: the stream is gone.
        """
        try:
            self.core.send_message(call.stream_id, payload)
        except wire.ProtocolFailure:
            raise CallLost("the stream is gone") from None

    def has_room(self, call: ServerCall) -> bool:
        """Whether what ``call`` has queued is within :data:`SEND_QUEUE_BYTES`."""
        return (
            self.core.pending_bytes(call.stream_id) + len(self._writer.unsent) <= SEND_QUEUE_BYTES
        )

    async def wait_sent(self, call: ServerCall) -> None:
        """Write what is queued, then wait while ``call``'s queue is over its bound.

        Raises:
            CallLost: the stream or the connection is gone.
        """
        await self.flush()
        while self.lost is None and call.lost is None and not self.has_room(call):
            drained = self._drained
            if drained is None:
                drained = self._drained = trio.Event()
            await drained.wait()
        if call.lost is not None:
            raise CallLost(call.lost)

    def finish(self, call: ServerCall, status: wire.GrpcStatus, message: str | None) -> None:
        self.core.finish(call.stream_id, status, message)
        self._write_wanted.set()

    def goaway(self) -> None:
        """Queue GOAWAY (no new calls); open calls go on."""
        self.core.close()
        self._write_wanted.set()

    def stop_calls(self) -> None:
        """The server is stopping: cancel every call's handler (each ends UNAVAILABLE)."""
        for call in list(self._calls.values()):
            call.scope.cancel()

    def close(self) -> None:
        """End the connection once what is queued is written (GOAWAY last)."""
        self.goaway()
        self._closing = True

    # ---- writing ---------------------------------------------------------------

    def _wake_writer(self) -> None:
        self._write_wanted.set()  # the current event: the writer task replaces it

    async def flush(self) -> None:
        """Write every queued byte unless another task is writing. Never raises for a
        broken connection. Cancellation: a write cancelled halfway loses the connection."""
        await self._writer.flush()

    async def _write_loop(self) -> None:
        while self.lost is None:
            await self._write_wanted.wait()
            self._write_wanted = trio.Event()
            await self.flush()
            if self._closing and not self._writer.pending:
                self._lose("closed by the server")

    def _lose(self, detail: str) -> None:
        if self.lost is not None:
            return
        self.lost = detail
        for call in list(self._calls.values()):
            call.lose(detail)
        if self._drained is not None:
            self._drained.set()
        self._write_wanted.set()
        self.scope.cancel()


class Accepted(Protocol):
    """An accepted connection as a stopping server sees it (a :class:`ServerConnection`,
    or one whose client has not spoken yet)."""

    scope: trio.CancelScope

    def stop_calls(self) -> None: ...

    def close(self) -> None: ...


class Service:
    """What a server's connections share: routes, limits, the budget, the token."""

    def __init__(
        self,
        routes: dict[str, Handler],
        limits: wire.ServerLimits,
        *,
        token: str | None,
        token_refusal: str,
        nursery: trio.Nursery,
    ) -> None:
        self.routes = routes
        self.limits = limits
        self.budget = ByteBudget(int(limits.server_message_bytes))
        resets = int(limits.server_reset_budget)
        self.resets = RateBudget(resets, resets / limits.refill_seconds, time.monotonic())
        self.token = token
        self.token_refusal = token_refusal
        self.nursery = nursery
        self._preface: bytes | None = None
        #: Every accepted connection still open (``max_connections`` counts them).
        self.connections: set[Accepted] = set()

    @property
    def preface(self) -> bytes:
        """The server preface every connection of these limits starts with (our SETTINGS
        and window opening), built once: it can be written at accept, before a
        connection's state machine exists."""
        if self._preface is None:
            core = ServerCore(self.limits)
            core.initiate()
            self._preface = core.data_to_send()
            core.dispose()
        return self._preface

    def token_ok(self, path: str, metadata: dict[str, str]) -> bool:
        """Whether the call may go on: health probes stay open (orchestrators poll them
        unauthenticated); everything else needs the token, compared in constant time."""
        if self.token is None or path.startswith("/grpc.health."):
            return True
        supplied = metadata.get("authorization", "")
        return hmac.compare_digest(supplied.encode(), self.token.encode())

    def max_message_bytes(self) -> int:
        # Read per connection, so a test can lower the module's limit.
        return MAX_MESSAGE_BYTES
