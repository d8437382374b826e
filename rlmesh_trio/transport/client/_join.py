"""One bidirectional Join stream on a :class:`Connection`, multiplexed by ``request_id``."""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from ... import _wire as wire
from ._conn import CLOSED, Connection, ConnectionLost

__all__ = ["JoinSession", "SessionClosed"]

log = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")

#: A response's ``request_id`` (a C-level getter: the demux calls it once per response).
_request_id_of: Callable[[Any], str] = operator.attrgetter("request_id")


class SessionClosed(Exception):
    """The Join stream is gone. ``detail`` reads like ``transport error: connection closed``."""

    def __init__(
        self,
        detail: str,
        status: wire.GrpcStatus | None = None,
        status_message: str | None = None,
    ) -> None:
        self.detail = detail
        self.status = status
        self.status_message = status_message
        super().__init__(detail)


class _Slot(Generic[T]):
    """A one-shot result the reader fills and a Trio task awaits (``event`` wakes it)."""

    __slots__ = ("done", "error", "event", "value")

    def __init__(self) -> None:
        # Made only when the waiter parks: a route reading its own reply never does.
        self.event: trio.Event | None = None
        self.done = False
        self.value: T | None = None
        self.error: BaseException | None = None

    def resolve(self, value: T) -> None:
        if not self.done:
            self.done = True
            self.value = value
            if self.event is not None:
                self.event.set()

    def fail(self, error: BaseException) -> None:
        if not self.done:
            self.done = True
            self.error = error
            if self.event is not None:
                self.event.set()


class _Callback(Generic[T]):
    """A pending request answered through a callback instead of a waiting task."""

    __slots__ = ("_on_done", "done")

    def __init__(self, on_done: Callable[[T | BaseException], None]) -> None:
        self._on_done = on_done
        self.done = False

    def resolve(self, outcome: T | BaseException) -> None:
        if self.done:
            return
        self.done = True
        try:
            self._on_done(outcome)
        except Exception:  # it runs inside the reader: a bug there must not end the stream
            log.exception("a Join response callback failed")

    fail = resolve  # the callback tells a value from an error itself


class JoinSession(Generic[R]):
    """A Join stream shared by every request of one client (or of several routes).

    ``parse`` turns response bytes into the response envelope. The stream's
    headers go out with the first request.
    """

    def __init__(
        self,
        conn: Connection,
        path: str,
        parse: Callable[[bytes], R],
        *,
        metadata: dict[str, str] | None,
    ) -> None:
        self._conn = conn
        self._demux: wire.JoinDemux[R] = wire.JoinDemux(parse, _request_id_of)
        self._stream_id: int | None = None
        self._ending: SessionClosed | None = None
        self._finished = trio.Event()
        self._end_waits: list[_Slot[None]] = []
        self._half_closed = False
        try:
            self._stream_id = conn.open_stream(path, self, metadata=metadata)
        except ConnectionLost as exc:
            self.on_lost(exc.detail)

    @property
    def alive(self) -> bool:
        return self._ending is None

    @property
    def idle(self) -> bool:
        """No request is waiting for its response."""
        return not len(self._demux)

    def has_pending(self, request_id: str) -> bool:
        return request_id in self._demux.waiting

    async def request(
        self, request_id: str, payload: bytes, *, kill_on_cancel: bool
    ) -> tuple[R, int]:
        """Send one encoded request and wait for the response carrying ``request_id``.

        Returns the parsed response and its encoded size.

        Raises:
            SessionClosed: the stream ended first (or had already).
        Cancellation: with ``kill_on_cancel`` a cancelled wait tears the
        stream down (the endpoint's state is unknown afterwards); without it
        the request is abandoned and a late response is dropped.
        """
        slot: _Slot[tuple[R, int]] = _Slot()
        self._send(request_id, payload, slot)
        conn = self._conn
        try:
            if not conn.write_now():
                await conn.flush()
            await conn.wait_reply(slot)
        except trio.Cancelled:
            self._demux.forget(request_id)
            if kill_on_cancel:
                self.kill()
            raise
        error = slot.error
        if error is not None:
            if isinstance(error, SessionClosed):  # one instance per raise: clean tracebacks
                raise SessionClosed(error.detail, error.status, error.status_message)
            raise error
        return slot.value  # type: ignore[return-value]

    def submit(
        self,
        request_id: str,
        payload: bytes,
        on_done: Callable[[tuple[R, int] | BaseException], None],
    ) -> None:
        """Send one encoded request without waiting: ``on_done`` gets the parsed response
        and its encoded size, or the error (:class:`SessionClosed`).

        Never blocks. ``on_done`` is called once, later: from the connection's
        reader when the response arrives, or from whoever ends the session.

        Raises:
            SessionClosed: the stream is already gone.
        """
        self._send(request_id, payload, _Callback(on_done))
        conn = self._conn
        # Straight to the socket when it takes the bytes whole: no writer task to wake.
        if not conn.write_now():
            conn.wake_writer()
        conn.wake_reader()

    def _send(self, request_id: str, payload: bytes, waiter: wire.Waiter[tuple[R, int]]) -> None:
        if self._ending is not None or self._half_closed or self._stream_id is None:
            raise self._ending or SessionClosed(f"transport error: {CLOSED}")
        wire.check_size(payload, "a Join request")
        self._demux.register(request_id, waiter)
        try:
            self._conn.send(self._stream_id, payload)
        except ConnectionLost as exc:
            self.on_lost(exc.detail)

    async def end(self, grace: float) -> None:
        """Half-close the stream, give the server ``grace`` seconds to end it, then kill it.

        Cancellation: the stream is killed all the same.
        """
        try:
            if self._ending is None and self._stream_id is not None:
                self._half_closed = True  # no request may follow our end of the stream
                self._conn.end_stream(self._stream_id)
                with trio.move_on_after(grace):
                    await self.wait_finished()
        finally:
            self.kill()

    async def wait_finished(self) -> None:
        """Wait until the stream has ended (after the server ends it, or a kill).

        The waiting task reads the connection itself, as a request does: the
        server's trailers reach it with no wait for the background reader.
        Cancellation: leaves at once; the stream is left as it is.
        """
        if not self._finished.is_set():
            ended: _Slot[None] = _Slot()
            self._end_waits.append(ended)
            try:
                await self._conn.wait_reply(ended)
            finally:
                if ended in self._end_waits:
                    self._end_waits.remove(ended)
        await self._finished.wait()  # a lost connection returns above before the stream ends

    def kill(self) -> None:
        """Tear the stream down now (RST_STREAM) and fail every pending request. Never blocks."""
        if self._stream_id is not None and self._ending is None:
            self._conn.reset_stream(self._stream_id)
        self.on_lost(CLOSED)

    # ---- the connection's reader calls these ---------------------------------

    def on_headers(self, headers: list[tuple[str, str]]) -> None:
        pass  # a Join server sends them at once; the responses are what matter

    def on_message(self, data: bytes) -> None:
        try:
            self._demux.deliver(data)
        except wire.Undecodable as exc:
            if self._stream_id is not None:
                self._conn.reset_stream(self._stream_id)
            self._finish(SessionClosed(f"transport error: {exc}"))

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None:
        if status is None or status is wire.GrpcStatus.OK:
            self.on_lost(CLOSED)
            return
        text = f"{status.name}: {message}" if message else status.name
        self._finish(SessionClosed(f"transport error: status {text}", status, message))

    def on_lost(self, detail: str) -> None:
        self._finish(SessionClosed(f"transport error: {detail}"))

    def replies_owed(self) -> bool:
        return bool(self._demux.waiting)

    def _finish(self, ending: SessionClosed) -> None:
        if self._ending is None:
            self._ending = ending
        self._finished.set()
        for ended in self._end_waits:
            ended.resolve(None)
        self._demux.fail_all(self._ending)
