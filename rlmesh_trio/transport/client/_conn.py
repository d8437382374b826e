"""One HTTP/2 connection to an endpoint, driven from Trio over the I/O-free core.

A caller that can wait writes its own request straight to the socket
(:meth:`Connection.flush`), which saves a task switch on the hot path; the
writer task flushes what callers that cannot wait queued.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl as _ssl
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from ... import _wire as wire
from .._address import Address
from .._stream import ByteStream, byte_stream
from .._writing import SocketWriter
from ._reading import CLOSED, ReplyWait, SharedReader

__all__ = ["CLOSED", "Connection", "ConnectionLost", "StreamHandler"]

log = logging.getLogger(__name__)

NOT_HTTP2 = "not a gRPC/HTTP2 endpoint"
#: Seconds between keepalive pings (as 0.1.0 clients do) and to wait for the answer.
KEEPALIVE_INTERVAL = 30.0
KEEPALIVE_TIMEOUT = 10.0
#: Reads at the start of a connection that are always acknowledged at once (see below).
EAGER_ACK_READS = 16


def goaway_detail(event: wire.ConnectionTerminated) -> str:
    """How a GOAWAY ended our streams: the server's reason when it gave one (its debug
    data: ours says "too many connections: ..." to a connection past its limit)."""
    reason = event.additional_data.decode("utf-8", "replace").strip()
    if not reason:
        return CLOSED
    return f"the server closed the connection: {reason[:200]}"


class ConnectionLost(Exception):
    """The connection is gone; ``detail`` says how (``connection closed``, ...)."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class StreamHandler(Protocol):
    """Who hears about one stream's events (called from the reader; must not block)."""

    def on_headers(self, headers: list[tuple[str, str]]) -> None: ...

    def on_message(self, data: bytes) -> None: ...

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None: ...

    def on_lost(self, detail: str) -> None: ...

    def replies_owed(self) -> bool: ...


async def _open_stream(address: Address, ssl: _ssl.SSLContext | None) -> ByteStream:
    if address.path is not None:
        tcp = await trio.open_unix_socket(address.path)
    else:
        if address.host is None or address.port is None:
            raise OSError(f"no host and port in {address!r}")
        tcp = await trio.open_tcp_stream(address.host, address.port)
        tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ssl is None:
        return byte_stream(tcp)
    # gRPC over TLS negotiates HTTP/2 by ALPN; a caller's context may not say so.
    ssl.set_alpn_protocols(["h2"])
    tls = trio.SSLStream(tcp, ssl, server_hostname=address.host or None)
    try:
        await tls.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(tcp)
        raise
    return byte_stream(tls)


class Connection:
    """A live HTTP/2 connection. Make one with :meth:`open`; never reused after loss."""

    def __init__(self, stream: ByteStream, authority: str, scheme: str) -> None:
        self._stream = stream
        self.authority = authority
        self.scheme = scheme
        self._core = wire.ClientCore()
        self._handlers: dict[int, StreamHandler] = {}
        self._write_wanted = trio.Event()
        self._ping_answered = trio.Event()
        self._stopped = trio.Event()
        self.lost: str | None = None
        self.token = trio.lowlevel.current_trio_token()
        self._writer = SocketWriter(
            self._core,
            stream,
            self,
            lose=self.lose,
            wake=self._write_wanted_set,
            checkpoints=True,
        )
        self._eager = EAGER_ACK_READS
        self._reading = SharedReader(stream, self)
        #: Wait until a waiter is answered (or failed), reading the socket if no one
        #: is. Cancellation: returns the read role to the connection; the request's
        #: owner decides what the cancelled wait means. (Bound once: called per reply.)
        self.wait_reply: Callable[[ReplyWait], Awaitable[None]] = self._reading.wait_reply
        #: Write the queued bytes straight to the socket if it takes them whole: no await.
        #: Returns ``False`` when bytes are left for :meth:`flush` (a TLS stream, or a
        #: full socket buffer). Never raises for a broken connection (see :meth:`flush`).
        #: (Bound once: called per request.)
        self.write_now: Callable[[], bool] = self._writer.write_now

    @classmethod
    async def over(cls, stream: ByteStream, authority: str, scheme: str = "http") -> Connection:
        """A connection over an open byte stream: the preface sent, its tasks started as
        system tasks (as :meth:`open` without a nursery). For tests and custom streams.

        Cancellation: a cancelled start leaves the connection lost, its stream closed.
        """
        conn = cls(stream, authority, scheme)
        conn._core.initiate()
        trio.lowlevel.spawn_system_task(conn._run)
        await conn.flush()
        return conn

    @classmethod
    async def open(
        cls,
        address: Address,
        *,
        ssl: _ssl.SSLContext | None,
        nursery: trio.Nursery | None,
    ) -> Connection:
        """Connect, send the HTTP/2 preface and start the connection's tasks.

        Raises:
            OSError: the endpoint is unreachable or refused (the caller maps it).
            ssl.SSLError: the TLS handshake failed.
        Cancellation: a cancelled open leaves nothing behind.
        """
        stream = await _open_stream(address, ssl)
        authority = "localhost" if address.path is not None else f"{address.host}:{address.port}"
        conn = cls(stream, authority, "https" if ssl is not None else "http")
        conn._core.initiate()
        if nursery is not None:
            nursery.start_soon(conn._run)
        else:
            trio.lowlevel.spawn_system_task(conn._run)
        await conn.flush()
        return conn

    @property
    def usable(self) -> bool:
        """Open, not lost, not draining after GOAWAY, and in the current Trio run."""
        if self.lost is not None or self._core.terminated is not None:
            return False
        try:
            return trio.lowlevel.current_trio_token() is self.token
        except RuntimeError:
            return False

    def open_stream(
        self,
        path: str,
        handler: StreamHandler,
        *,
        metadata: dict[str, str] | None,
        timeout: float | None = None,
    ) -> int:
        """Queue a new stream's headers (written by the next :meth:`flush`).

        Raises:
            ConnectionLost: the connection is gone or closing.
        """
        if self.lost is not None:
            raise ConnectionLost(self.lost)
        headers = wire.request_headers(
            path,
            self.authority,
            scheme=self.scheme,
            metadata=metadata,
            timeout=timeout,
        )
        try:
            stream_id = self._core.open_stream(headers)
        except wire.ProtocolFailure:
            raise ConnectionLost(CLOSED) from None
        self._handlers[stream_id] = handler
        return stream_id

    def send(self, stream_id: int, payload: bytes, *, end: bool = False) -> None:
        """Queue one message (written by the next :meth:`flush`). Never blocks.

        Raises:
            ConnectionLost: the connection or the stream is gone.
        """
        if self.lost is not None:
            raise ConnectionLost(self.lost)
        try:
            self._core.send_message(stream_id, payload, end=end)
        except wire.ProtocolFailure:
            raise ConnectionLost(CLOSED) from None

    def end_stream(self, stream_id: int) -> None:
        """Queue our half-close of a stream. Never blocks."""
        if self.lost is None:
            self._core.end_stream(stream_id)
            self.wake_writer()

    def reset_stream(self, stream_id: int) -> None:
        """Abandon a stream (RST_STREAM); its handler hears nothing more. Never blocks."""
        self._handlers.pop(stream_id, None)
        if self.lost is None:
            self._core.reset_stream(stream_id)
            self.wake_writer()

    def wake_writer(self) -> None:
        """Have the writer task flush queued bytes soon (for callers that cannot wait)."""
        if self._writer.pending:
            self._write_wanted.set()

    def _write_wanted_set(self) -> None:
        self._write_wanted.set()  # the current event: the writer task replaces it

    async def flush(self) -> None:
        """Write every queued byte (unless another task is already writing them).

        Never raises for a broken connection: that is recorded and reported to
        the streams. Cancellation: bytes not yet handed to the socket stay
        queued for the writer; a write cancelled halfway loses the connection.
        """
        await self._writer.flush()

    async def _run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_loop)
                nursery.start_soon(self._write_loop)
                nursery.start_soon(self._keepalive)
                await self._stopped.wait()
                nursery.cancel_scope.cancel()
        except Exception:  # a bug here must not crash the Trio run (system task)
            log.exception("connection task failed")
        finally:
            self.lose(CLOSED)
            with trio.CancelScope(shield=True):
                await self._stream.aclose()

    def wake_reader(self) -> None:
        """Replies are owed that no task will wait for: have the background reader read."""
        self._reading.wake_background()

    def replies_owed(self) -> bool:
        for handler in self._handlers.values():
            if handler.replies_owed():
                return True
        return False

    async def _read_loop(self) -> None:
        await self._reading.background()

    def process(self, data: bytes) -> None:
        """Feed bytes read to the core and hand out what happened. Never raises."""
        try:
            events = self._core.receive_data(data)
        except wire.NotHttp2:
            self.lose(NOT_HTTP2)
            return
        except wire.ProtocolFailure as exc:
            log.debug("HTTP/2 failure: %s", exc)
            self.lose(CLOSED)
            return
        handlers = self._handlers
        for event in events:
            if type(event) is wire.MessageReceived:  # the hot case, dispatched inline
                handler = handlers.get(event.stream_id)
                if handler is not None:
                    handler.on_message(event.data)
            else:
                self._dispatch(event)
        if self._stream.acknowledges:
            self._acknowledge_if_owed()
        if self._core.wants_write:
            self._write_wanted.set()

    def _acknowledge_if_owed(self) -> None:
        # A server that does not disable Nagle's algorithm (rlmesh 0.1.0's do not)
        # holds a write back while its previous one is unacknowledged, and a
        # delayed ACK then costs 40 ms. Acknowledge at once after a read that
        # left replies owed, and for a connection's first reads.
        if self._eager:
            self._eager -= 1
        elif not self.replies_owed():
            return
        self._stream.acknowledge_now()

    def _dispatch(self, event: wire.Event) -> None:
        if isinstance(event, wire.ResponseHeaders):
            handler = self._handlers.get(event.stream_id)
            if handler is not None:
                handler.on_headers(event.headers)
        elif isinstance(event, wire.StreamEnded):
            handler = self._handlers.pop(event.stream_id, None)
            if handler is not None:
                handler.on_end(event.status, event.message)
        elif isinstance(event, wire.StreamReset):
            handler = self._handlers.pop(event.stream_id, None)
            if handler is not None:
                handler.on_lost(event.detail)
        elif isinstance(event, wire.ConnectionTerminated):
            detail = goaway_detail(event)
            for stream_id in [s for s in self._handlers if s > event.last_stream_id]:
                self._handlers.pop(stream_id).on_lost(detail)
            if not self._handlers:
                self.lose(detail)
        elif isinstance(event, wire.PingAcknowledged):
            self._ping_answered.set()

    async def _write_loop(self) -> None:
        while True:
            await self._write_wanted.wait()
            self._write_wanted = trio.Event()
            await self.flush()

    async def _keepalive(self) -> None:
        while True:
            await trio.sleep(KEEPALIVE_INTERVAL)
            if self.lost is not None or self._core.terminated is not None:
                return  # closing (GOAWAY): its streams end on their own; HTTP/2 forbids PING
            self._ping_answered = trio.Event()
            if not self._core.ping(os.urandom(8)):
                return
            await self.flush()
            with trio.move_on_after(KEEPALIVE_TIMEOUT):
                await self._ping_answered.wait()
            if not self._ping_answered.is_set():
                self.lose("keepalive ping not answered")
                return

    def lose(self, detail: str) -> None:
        """Record the connection as lost (``detail`` says how) and tell every stream."""
        if self.lost is None:
            self.lost = detail
        self._stopped.set()
        handlers, self._handlers = self._handlers, {}
        for handler in handlers.values():
            try:
                handler.on_lost(self.lost)
            except Exception:
                log.exception("a stream handler failed on connection loss")

    def close(self) -> None:
        """Drop the connection now (GOAWAY queued best-effort). Never blocks; idempotent."""
        if self.lost is None:
            self._core.close()
            self.wake_writer()
        self.lose(CLOSED)
