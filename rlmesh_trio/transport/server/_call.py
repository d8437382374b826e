"""One served gRPC call as its handler sees it: messages in, messages out, a status.

A :class:`ServerCall` belongs to one connection (:mod:`._conn`) and is
used only from that server's Trio run.

A handler whose per-message work is synchronous may set :attr:`ServerCall.inline`:
a message that finds it waiting in :meth:`~ServerCall.recv` with nothing else in
hand is then served by the connection's reader, in the reader's turn, and the
reply goes out in the reader's write: no trip through Trio's scheduler to the
handler's task and back. Everything else reaches the handler as before.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from ..._wire import GrpcError, GrpcStatus

__all__ = ["CallConnection", "CallLost", "Handler", "ServerCall"]


class CallLost(Exception):
    """The client reset the stream or the connection is gone: nobody hears a reply."""


class CallConnection(Protocol):
    """What a call asks of its connection (``ServerConnection``, without importing it)."""

    def release(self, size: int) -> None: ...
    def send_headers(self, stream_id: int) -> None: ...
    def queue_message(self, call: ServerCall, payload: bytes) -> None: ...
    def has_room(self, call: ServerCall) -> bool: ...
    async def wait_sent(self, call: ServerCall) -> None: ...
    def finish(self, call: ServerCall, status: GrpcStatus, message: str | None) -> None: ...


class ServerCall:
    """One stream of a served method.

    ``metadata`` holds the request headers by name (pseudo-headers too).
    """

    __slots__ = (
        "_conn",
        "_failure",
        "_half_closed",
        "_headers_sent",
        "_inbox",
        "_refusal",
        "_wake",
        "finished",
        "inline",
        "lost",
        "metadata",
        "path",
        "scope",
        "stream_id",
    )

    def __init__(
        self, conn: CallConnection, stream_id: int, path: str, metadata: dict[str, str]
    ) -> None:
        self._conn = conn
        self.stream_id = stream_id
        self.path = path
        self.metadata = metadata
        self._inbox: collections.deque[bytes] = collections.deque()
        self._half_closed = False
        self._headers_sent = False
        self._refusal: GrpcError | None = None
        self._wake: trio.Event | None = None  # set while the handler waits in recv()
        self._failure: Exception | None = None  # what serving a message inline raised
        #: Serve one message synchronously in the reader, or return ``False`` (before
        #: doing anything) to leave it to the handler; set by the handler.
        self.inline: Callable[[bytes], bool] | None = None
        self.lost: str | None = None
        self.finished = False
        self.scope = trio.CancelScope()

    # ---- the connection's side (never blocks) ---------------------------------

    def deliver(self, data: bytes) -> None:
        serve = self.inline
        if (
            serve is not None
            and self._wake is not None
            and not self._inbox
            and self._refusal is None
            and self.lost is None
            and self._conn.has_room(self)
        ):
            # The handler waits for exactly this message, nothing else in hand.
            try:
                served = serve(data)
            except Exception as exc:  # the handler raises it, as if it had served it
                self._failure = exc
                served = True
            if served:
                self._conn.release(len(data) + 5)
                if self._failure is not None:
                    self._poke()
                return
        self._inbox.append(data)
        self._poke()

    def half_close(self) -> None:
        self._half_closed = True
        self._poke()

    def refuse(self, status: GrpcStatus, message: str) -> None:
        if self._refusal is None:
            self._refusal = GrpcError(status, message)
        self._poke()

    def lose(self, detail: str) -> None:
        if self.lost is None:
            self.lost = detail
        self._poke()

    def drop_inbox(self) -> int:
        """Forget messages never read; returns their bytes as the core counted them."""
        size = sum(len(data) + 5 for data in self._inbox)
        self._inbox.clear()
        return size

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    # ---- the handler's side ---------------------------------------------------

    async def recv(self) -> bytes | None:
        """The next request message, or ``None`` once the client half-closed.

        Raises:
            GrpcError: the client sent a message the server cannot take (over
                the size limit or the in-flight budget); messages before it
                are read first.
            CallLost: the stream was reset or the connection is gone.
            Exception: what serving a message through :attr:`inline` raised.
        Cancellation: cancellable; nothing is lost.
        """
        while True:
            if self._failure is not None:
                raise self._failure
            inbox = self._inbox
            if inbox:
                data = inbox.popleft()
                self._conn.release(len(data) + 5)
                return data
            if self.lost is not None:
                raise CallLost(self.lost)
            if self._refusal is not None:
                raise self._refusal
            if self._half_closed:
                return None
            wake = self._wake = trio.Event()
            try:
                await wake.wait()
            finally:
                self._wake = None  # not waiting any more (woken or cancelled)

    def send_headers(self) -> None:
        """Queue the response headers now (a Join sends them before any message)."""
        if self.lost is None and not self.finished and not self._headers_sent:
            self._headers_sent = True
            self._conn.send_headers(self.stream_id)

    async def send(self, payload: bytes) -> None:
        """Send one response message; waits while the client is not reading.

        Raises:
            CallLost: the stream or the connection is gone.
        Cancellation: the message may or may not have been queued.
        """
        self.send_now(payload)
        await self._conn.wait_sent(self)

    def send_now(self, payload: bytes) -> None:
        """Queue one response message without waiting: the connection writes it at its
        next flush (the reader's, after serving inline; the end of a unary call's).

        Raises:
            CallLost: the stream or the connection is gone.
        """
        if self.lost is not None or self.finished:
            raise CallLost(self.lost or "the call has finished")
        if not self._headers_sent:
            self.send_headers()
        self._conn.queue_message(self, payload)

    async def sent(self) -> None:
        """Write what :meth:`send_now` queued; waits while the client is not reading.

        Raises:
            CallLost: the stream or the connection is gone.
        """
        await self._conn.wait_sent(self)

    def finish(self, status: GrpcStatus, message: str | None = None) -> None:
        """End the call with ``status`` (trailers after the queued messages). Idempotent."""
        if self.finished:
            return
        self.finished = True
        if self.lost is None:
            self._conn.finish(self, status, message)


#: A method's handler: serve one call; return for OK, raise GrpcError for a status.
Handler = Callable[[ServerCall], Awaitable[None]]
