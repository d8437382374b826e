"""One bidirectional Join stream, multiplexed by ``request_id``.

Asyncio side: one session task owns the grpclib stream; it runs a writer
(draining an outbox queue, so sends never interleave on the wire) and waits
for the stream's end. Responses do not go through a reader task: the
stream's grpclib receive buffer is replaced by a :class:`_DeliveringBuffer`
that cuts gRPC messages out of the DATA frames as the HTTP/2 protocol feeds
them, parses each and resolves the waiting :class:`Slot` by the response's
``request_id`` right there (saving an asyncio task wake-up and a loop pass
per response). Trio side: :meth:`JoinSession.request` writes the encoded
request straight into the HTTP/2 connection when the writer is idle (else
queues it for the writer) and waits on its slot -- no asyncio task and no
bridge call per request.

A session ends when the server ends the stream (status OK or not), the
connection drops, or the owner kills it; every waiter still pending then
fails with :class:`SessionClosed`, and later requests fail at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs
import grpclib.client
import grpclib.const
import grpclib.protocol
import trio
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.metadata import decode_grpc_message

from . import _bridge as bridge
from . import _h2fast
from ._channel import check_size

__all__ = ["JoinSession", "SessionClosed"]

log = logging.getLogger(__name__)

R = TypeVar("R")

_CLOSED = "connection closed"
_END = object()  # outbox sentinel: half-close the stream


@attrs.frozen
class _Ending:
    """Why a session ended: a transport detail plus the gRPC status when one was received."""

    detail: str
    status: grpclib.const.Status | None = None
    status_message: str | None = None


class SessionClosed(Exception):
    """The Join stream is gone. ``detail`` reads like ``transport error: connection closed``."""

    def __init__(
        self,
        detail: str,
        status: grpclib.const.Status | None = None,
        status_message: str | None = None,
    ) -> None:
        self.detail = detail
        self.status = status
        self.status_message = status_message
        super().__init__(detail)


def _ending_from(exc: BaseException) -> _Ending:
    if isinstance(exc, GRPCError):
        if exc.status is grpclib.const.Status.OK:
            return _Ending(_CLOSED)
        name = exc.status.name
        text = f"{name}: {exc.message}" if exc.message else name
        return _Ending(f"status {text}", exc.status, exc.message)
    return _Ending(_CLOSED)


class JoinSession(Generic[R]):
    """A Join stream shared by every request of one client (or of several routes).

    ``parse`` turns response bytes into the response envelope; ``request_id_of``
    reads its ``request_id``. Create it from Trio, then :meth:`start` it.
    """

    def __init__(
        self,
        channel: grpclib.client.Channel,
        path: str,
        parse: Callable[[bytes], R],
        request_id_of: Callable[[R], str],
        *,
        metadata: dict[str, str] | None,
    ) -> None:
        self._channel = channel
        self._path = path
        self._parse = parse
        self._request_id_of = request_id_of
        self._metadata = metadata
        self._pending: dict[str, bridge.Slot[tuple[R, int]] | _Callback[tuple[R, int]]] = {}
        self._outbox: bridge.AsyncioQueue[Any] = bridge.AsyncioQueue()
        self._ending: _Ending | None = None
        self._task: bridge.AsyncioTask[None] | None = None
        self._finished = trio.Event()
        self._half_closed = False
        # Set by the writer once the stream is open; ``_writing`` while it sends.
        self._open_stream: grpclib.client.Stream[Any, Any] | None = None
        self._writing = False

    # ---- Trio side -------------------------------------------------------

    def start(self) -> None:
        """Open the stream (asynchronously; the first request's wait covers the opening)."""
        bridge.require_loop("a Join stream")
        bridge.post(self._spawn)

    @property
    def alive(self) -> bool:
        return self._ending is None

    def has_pending(self, request_id: str) -> bool:
        return request_id in self._pending

    async def request(
        self, request_id: str, payload: bytes, *, kill_on_cancel: bool
    ) -> tuple[R, int]:
        """Send one encoded request and wait for the response carrying ``request_id``.

        Returns the parsed response and its encoded size. Raises
        :class:`SessionClosed` when the stream ends first.

        Cancellation: with ``kill_on_cancel`` a cancelled wait tears the
        stream down (the endpoint's state is unknown afterwards); without it
        the request is abandoned and a late response is dropped.
        """
        slot: bridge.Slot[tuple[R, int]] = bridge.Slot()
        self._send(request_id, payload, slot)
        try:
            return await slot.wait()
        except trio.Cancelled:
            self._pending.pop(request_id, None)
            if kill_on_cancel:
                self.kill()
            raise

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
        Raises :class:`SessionClosed` at once when the stream is already gone.
        """
        self._send(request_id, payload, _Callback(on_done))

    def _send(
        self,
        request_id: str,
        payload: bytes,
        waiter: bridge.Slot[tuple[R, int]] | _Callback[tuple[R, int]],
    ) -> None:
        """Register ``waiter`` for ``request_id`` and send ``payload`` (now, or via the writer)."""
        if self._ending is not None or self._half_closed:
            raise self._closed_error()
        if request_id in self._pending:
            raise ValueError(f"request id {request_id!r} is already in flight")
        check_size(payload, "a Join request")
        self._pending[request_id] = waiter
        if not self._send_now(payload):
            self._outbox.put_nowait(payload)

    def _send_now(self, payload: bytes) -> bool:
        """Write a small message straight into the HTTP/2 connection, if that is safe now.

        The hot path: it saves waking the writer task (about 35 µs per request,
        some 7% of a route step against rlmesh's servers). Safe only when the
        writer is idle with nothing queued (so order is kept), the stream is
        open, and the message fits the flow-control window and one DATA frame;
        otherwise the caller queues it for the writer. The frame goes out by
        :func:`_h2fast.send_data` when that accepts it, else through h2.
        Reaches into grpclib's stream internals (``_stream``,
        ``_h2_connection``, ``_transport``), guarded so any surprise falls
        back to the writer.
        """
        stream = self._open_stream
        if stream is None or self._writing or self._half_closed or not self._outbox.empty():
            return False
        try:
            h2_stream = stream._stream
            frame = b"\x00" + len(payload).to_bytes(4, "big") + payload
            if _h2fast.send_data(h2_stream, frame):
                return True
            h2 = h2_stream._h2_connection
            stream_id = h2_stream.id
            if stream_id is None or not h2_stream.connection.write_ready.is_set():
                return False
            if len(frame) > min(
                h2.local_flow_control_window(stream_id), h2.max_outbound_frame_size
            ):
                return False
            h2.send_data(stream_id, frame)
        except Exception:
            log.debug("direct send refused; queueing for the writer", exc_info=True)
            return False
        # The frame is committed to h2's buffer now: never queue it a second time.
        # If the write fails the connection is gone and the reader reports that.
        with contextlib.suppress(Exception):
            h2_stream._transport.write(h2.data_to_send())
        return True

    def half_close(self) -> None:
        """End our side of the stream after everything queued so far is sent. Never blocks."""
        if not self._half_closed and self._ending is None:
            self._half_closed = True
            self._outbox.put_nowait(_END)

    async def wait_finished(self) -> None:
        """Wait until the session task has ended (after the server ends the stream)."""
        await self._finished.wait()

    def kill(self) -> None:
        """Tear the stream down now (RST_STREAM) and fail every pending request. Never blocks."""
        self._finish(_Ending(_CLOSED))
        task = self._task
        if task is not None and not task.done():
            bridge.post(task.cancel)
        elif task is None:
            self._finished.set()

    def _replies_owed(self) -> bool:
        return bool(self._pending)

    def _closed_error(self) -> SessionClosed:
        ending = self._ending or _Ending(_CLOSED)
        return SessionClosed(
            f"transport error: {ending.detail}", ending.status, ending.status_message
        )

    def _finish(self, ending: _Ending) -> None:
        self._open_stream = None
        if self._ending is None:
            self._ending = ending
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.fail(self._closed_error())

    # ---- asyncio side ----------------------------------------------------

    def _spawn(self) -> None:
        if self._ending is not None:
            self._finished.set()
            return
        self._task = bridge.spawn_asyncio(self._run())

    async def _run(self) -> None:
        ending = _Ending(_CLOSED)
        stream = self._channel.request(
            self._path,
            grpclib.const.Cardinality.STREAM_STREAM,
            bytes,
            bytes,
            metadata=self._metadata,
        )
        await stream.__aenter__()
        writer: bridge.AsyncioTask[None] | None = None
        owed_checks: list[Callable[[], bool]] | None = None
        try:
            await stream.send_request()
            # Tell the connection's reader when replies are still owed (it then ACKs at once).
            with contextlib.suppress(Exception):
                owed_checks = bridge.awaiting_replies(stream._stream._transport)
                owed_checks.append(self._replies_owed)
            direct = _install_delivering_buffer(stream, self._deliver)
            writer = bridge.spawn_asyncio(self._write(stream))
            try:
                await self._read(stream, direct)
            except StreamTerminatedError:
                # tonic servers end a stream with trailers and then RST_STREAM(NO_ERROR)
                # while our side is still open; grpclib then aborts the read even
                # though complete responses sit in the buffer. Deliver them (the
                # delivering buffer already has: it holds no complete message).
                if _trailers(stream) is None:
                    raise
                if direct is None:
                    await self._salvage(stream)
                elif direct.error is not None:
                    raise direct.error from None
            ending = _ending_from_trailers(_trailers(stream))
        except bridge.AsyncioCancelledError:
            # killed by the owner (its ending is already recorded) or by a failed send
            ending = _ending_from_trailers(_trailers(stream))
        except _Undecodable as exc:
            ending = _Ending(str(exc))
        except Exception as exc:
            log.debug("Join stream %s ended: %r", self._path, exc)
            status_headers = _trailers(stream)
            ending = (
                _ending_from(exc)
                if status_headers is None
                else _ending_from_trailers(status_headers)
            )
        finally:
            if owed_checks is not None:
                with contextlib.suppress(ValueError):
                    owed_checks.remove(self._replies_owed)
            if writer is not None:
                writer.cancel()
            self._finish(ending)
            self._finished.set()
            # Passing an exception skips grpclib's own end-of-call handshake (we
            # already have the status); it resets the stream if still open and
            # releases it.
            with contextlib.suppress(Exception):
                await stream.__aexit__(_StreamDone, _StreamDone(), None)

    async def _write(self, stream: grpclib.client.Stream[Any, Any]) -> None:
        self._open_stream = stream
        try:
            while True:
                payload = await self._outbox.get()
                if payload is _END:
                    self._open_stream = None
                    await stream.end()
                    return
                self._writing = True
                try:
                    await stream.send_message(payload)
                finally:
                    self._writing = False
        except bridge.AsyncioCancelledError:
            raise
        except Exception as exc:
            # A failed send means the stream is broken: stop the reader in case
            # the peer never answers; the session task then records why it ended.
            log.debug("Join stream %s send failed: %r", self._path, exc)
            task = self._task
            if task is not None:
                task.cancel()

    async def _read(
        self, stream: grpclib.client.Stream[Any, Any], direct: _DeliveringBuffer | None
    ) -> None:
        await stream.recv_initial_metadata()
        if direct is None:
            while True:
                data = await stream.recv_message()
                if data is None:
                    return
                self._deliver(data)
        # Responses are delivered by the buffer as they arrive; wait for the end.
        # grpclib's wrapper turns a reset or a lost connection into
        # StreamTerminatedError here, as it would around recv_message.
        with stream._wrapper:
            await direct.ended.wait()
        if direct.error is not None:
            raise direct.error

    async def _salvage(self, stream: grpclib.client.Stream[Any, Any]) -> None:
        # Reads grpclib's per-stream buffer directly (outside the cancelled
        # wrapper). The stream has ended, so every read returns at once.
        buffer = stream._stream.buffer
        while True:
            header = await buffer.read(5)
            if len(header) < 5:
                return
            data = await buffer.read(int.from_bytes(header[1:5], "big"))
            self._deliver(bytes(data))

    def _deliver(self, data: bytes) -> None:
        try:
            response = self._parse(data)
        except Exception as exc:
            raise _Undecodable(f"undecodable Join response ({type(exc).__name__}: {exc})") from exc
        slot = self._pending.pop(self._request_id_of(response), None)
        if slot is None:
            log.debug("dropping a Join response for no waiting request")
            return
        slot.resolve((response, len(data)))


class _Callback(Generic[R]):
    """A pending request answered through a callback instead of a waiting task."""

    __slots__ = ("_on_done", "done")

    def __init__(self, on_done: Callable[[R | BaseException], None]) -> None:
        self._on_done = on_done
        self.done = False

    def resolve(self, value: R) -> None:
        self._call(value)

    def fail(self, error: BaseException) -> None:
        self._call(error)

    def _call(self, outcome: R | BaseException) -> None:
        if self.done:
            return
        self.done = True
        try:
            self._on_done(outcome)
        except Exception:  # it runs inside the reader: a bug there must not end the stream
            log.exception("a Join response callback failed")


class _Undecodable(Exception):
    """A response that does not parse: the stream cannot be trusted any more."""


class _DeliveringBuffer(grpclib.protocol.Buffer):
    """A stream receive buffer that hands each complete gRPC message to ``deliver`` at once.

    grpclib's protocol calls :meth:`add` from ``data_received`` (inside the
    loop's socket reader) with each DATA frame's payload. Instead of queueing
    the bytes for a reader task, this buffer cuts length-prefixed messages out
    of them and calls ``deliver(message)`` synchronously. Nothing is held for
    a slow reader (the waiting slot keeps the parsed response), so
    flow-control credit is due at once; it is returned in batches of
    ``ack_batch`` bytes (a quarter of the stream window: h2 only sends a
    WINDOW_UPDATE for large amounts anyway, and each acknowledgement costs a
    trip through h2), the rest when grpclib releases the stream
    (:meth:`unacked_size`). :meth:`eof` (the stream ended) sets :attr:`ended`.
    An undecodable or compressed message stops delivery: :attr:`error` holds
    why and :attr:`ended` is set, so the session ends with that reason. Never
    raises into grpclib's protocol.
    """

    def __init__(
        self,
        ack_callback: Callable[[int], None],
        deliver: Callable[[bytes], None],
        *,
        ack_batch: int = 0,
    ) -> None:
        super().__init__(ack_callback)
        self._deliver_message = deliver
        self._partial = b""
        self._ack_batch = ack_batch
        self._owed = 0  # flow-control credit taken but not yet returned
        self.ended = bridge.AsyncioEvent()
        self.error: _Undecodable | None = None

    def add(self, data: bytes, ack_size: int) -> None:
        owed = self._owed + ack_size
        if owed > self._ack_batch:
            self._owed = 0
            self._ack_callback(owed)
        else:
            self._owed = owed
        if self.error is not None:
            return
        if self._partial:
            data = self._partial + data
        pos, end = 0, len(data)
        try:
            while end - pos >= 5:
                size = int.from_bytes(data[pos + 1 : pos + 5], "big")
                if end - pos - 5 < size:
                    break
                if data[pos]:
                    raise _Undecodable("compressed Join response (compression is not supported)")
                self._deliver_message(data[pos + 5 : pos + 5 + size])
                pos += 5 + size
        except _Undecodable as exc:
            self._stop(exc)
            return
        except Exception as exc:  # a delivery bug must not break grpclib's protocol
            log.debug("Join response delivery failed", exc_info=True)
            self._stop(_Undecodable(f"Join response delivery failed ({type(exc).__name__})"))
            return
        self._partial = data[pos:] if pos < end else b""

    def _stop(self, error: _Undecodable) -> None:
        self.error = error
        self._partial = b""
        self.ended.set()

    def eof(self) -> None:
        super().eof()
        self.ended.set()

    def unacked_size(self) -> int:
        """Credit still owed; grpclib acknowledges it when it releases the stream."""
        owed, self._owed = self._owed, 0
        return owed + super().unacked_size()


def _install_delivering_buffer(
    stream: grpclib.client.Stream[Any, Any], deliver: Callable[[bytes], None]
) -> _DeliveringBuffer | None:
    """Swap the just-opened stream's receive buffer for a delivering one, if safe.

    Reaches into grpclib internals (``Stream._stream.buffer`` and the
    ``_wrapper`` that wakes readers on a reset); returns ``None`` -- keep the
    reader-task path -- when they are not as expected or data already arrived.
    """
    try:
        h2_stream = stream._stream
        old = h2_stream.buffer
        if type(old) is not grpclib.protocol.Buffer or stream._wrapper is None:
            return None
        if old._eof or not old._unacked.empty() or old._acked_size:
            return None
        window = h2_stream._h2_connection.local_settings.initial_window_size
        direct = _DeliveringBuffer(old._ack_callback, deliver, ack_batch=window // 4)
    except Exception:
        log.debug("no delivering buffer; reading with a task", exc_info=True)
        return None
    h2_stream.buffer = direct
    return direct


class _StreamDone(Exception):
    """Marker passed to grpclib's stream exit: the session handled the stream's end itself."""


def _trailers(stream: grpclib.client.Stream[Any, Any]) -> Any:
    """The status-bearing headers the server ended the stream with, if it did.

    Trailers normally; for a trailers-only response (an immediate error such
    as FAILED_PRECONDITION for a second Join) the response headers themselves.
    """
    h2_stream = getattr(stream, "_stream", None)
    trailers = getattr(h2_stream, "trailers", None)
    if trailers is not None:
        return trailers
    headers = getattr(h2_stream, "headers", None)
    if headers is not None and "grpc-status" in dict(headers):
        return headers
    return None


def _ending_from_trailers(trailers: Any) -> _Ending:
    if trailers is None:
        return _Ending(_CLOSED)
    headers = dict(trailers)
    raw = headers.get("grpc-status", "0")
    try:
        status = grpclib.const.Status(int(raw))
    except ValueError:
        return _Ending(f"invalid grpc-status {raw!r}")
    if status is grpclib.const.Status.OK:
        return _Ending(_CLOSED)
    message = headers.get("grpc-message")
    if message is not None:
        message = decode_grpc_message(message)
    return _ending_from(GRPCError(status, message))
