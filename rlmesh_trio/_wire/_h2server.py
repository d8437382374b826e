"""The server side of gRPC over HTTP/2 as a state machine: bytes in, events out.

:class:`ServerCore` drives h2 in server mode through its public API for the
preface, SETTINGS, HEADERS and trailers, PING, RST_STREAM and GOAWAY; DATA
framing and flow control are the shared half (:class:`~._h2base.H2Base`).

What a client may do is bounded by :class:`~._limits.ServerLimits`: every
frame header is checked before its payload is kept, every message prefix
before its body, every message byte is held against the connection's and the
server's budgets until handled, and frames that cost us work without doing
any (resets, SETTINGS, PINGs, empty DATA, WINDOW_UPDATEs, CONTINUATIONs)
are rationed. Every protocol error queues a GOAWAY with its code.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from . import _frames
from ._events import (
    ConnectionTerminated,
    Event,
    MessageRefused,
    RequestEnded,
    RequestReceived,
    StreamReset,
)
from ._grpc import MAX_MESSAGE_BYTES, FramingError, GrpcStatus
from ._h2base import WINDOW, H2Base, ProtocolFailure, Stream
from ._limits import ByteBudget, ServerLimits

__all__ = ["PREFACE", "ProtocolFailure", "ServerCore", "trailers"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_RESPONSE_HEADERS = [(":status", "200"), ("content-type", "application/grpc")]
_DEFAULT_LIMITS = ServerLimits()
#: grpc-message is percent-encoded: printable ASCII stays as it is, except ``%``.
_MESSAGE_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if c != 0x25)


def trailers(status: GrpcStatus, message: str | None) -> list[tuple[str, str]]:
    """The gRPC trailers for ``status`` (``grpc-message`` percent-encoded)."""
    out = [("grpc-status", str(int(status)))]
    if message:
        out.append(("grpc-message", urllib.parse.quote(message, safe=_MESSAGE_SAFE)))
    return out


class ServerCore(H2Base):
    """One server HTTP/2 connection carrying gRPC calls. No I/O, no event loop.

    Call :meth:`initiate` at once (the server's SETTINGS go first), feed what
    the client sends to :meth:`receive_data`, and write :meth:`data_to_send`.
    ``budget`` is the server's byte budget, shared by its connections
    (``None``: only this connection's); give back what a connection held
    with :meth:`dispose` when it ends.
    """

    def __init__(
        self,
        limits: ServerLimits = _DEFAULT_LIMITS,
        budget: ByteBudget | None = None,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Inbound headers unvalidated: metadata such as a token must reach the token
        # check byte for byte (h2 would refuse a value with a trailing space outright,
        # ending the connection instead of the call with UNAUTHENTICATED).
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
        )
        h2c = h2.connection.H2Connection(config)
        codes = h2.settings.SettingCodes
        h2c.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                codes.MAX_CONCURRENT_STREAMS: int(limits.max_concurrent_streams),
                codes.INITIAL_WINDOW_SIZE: WINDOW,
                codes.MAX_HEADER_LIST_SIZE: int(limits.max_header_list_size),
            },
        )
        super().__init__(
            h2c, ByteBudget(int(limits.connection_message_bytes), budget), limits, clock
        )
        self._limits = limits
        self._max_message = max_message_bytes
        self._preface = b""  # the client's preface, until all 24 bytes are in
        self.terminated: ConnectionTerminated | None = None
        #: The last stream a graceful GOAWAY of ours let in (``None``: none sent).
        self.goaway_last: int | None = None

    # ---- sending -------------------------------------------------------------

    def initiate(self, sent: bytes = b"") -> None:
        """Queue our SETTINGS (the server's preface) and open the connection window.

        ``sent``: preface bytes already written for this connection (the same
        limits' :meth:`initiate` output, written at accept); they are not queued again.
        """
        h2c = self._h2
        h2c.initiate_connection()
        # Again as a change: h2 applies a header-list limit to its decoder once acked.
        h2c.update_settings(
            {h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: int(self._limits.max_header_list_size)}
        )
        h2c.increment_flow_control_window(WINDOW - h2c.inbound_flow_control_window)
        self._collect()
        if sent and self._out.startswith(sent):
            del self._out[: len(sent)]

    def send_headers(self, stream_id: int, extra: Iterable[tuple[str, str]] = ()) -> None:
        """Queue the response headers (``:status 200``, gRPC's content type, ``extra``)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.headers is not None:
            return
        stream.headers = [*_RESPONSE_HEADERS, *extra]
        try:
            self._h2.send_headers(stream_id, stream.headers)
        except h2.exceptions.ProtocolError:
            return
        self._collect()

    def finish(self, stream_id: int, status: GrpcStatus, message: str | None = None) -> None:
        """End the stream with ``status`` in its trailers, after the messages queued.

        A stream without response headers gets a trailers-only response. A
        no-op for a stream already gone.
        """
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            return
        stream.trailers = trailers(status, message)
        stream.want_end = True
        self._push(stream_id, stream)

    def close(self, error_code: int = h2.errors.ErrorCodes.NO_ERROR, detail: str = "") -> None:
        """Queue GOAWAY: no new streams on this connection.

        A graceful one (``NO_ERROR``) is framed here, not by h2: h2's own GOAWAY
        closes its state machine, which then refuses every frame the client still
        sends (its END_STREAM on a call in flight, a WINDOW_UPDATE, a SETTINGS
        acknowledgement) as a protocol error, where RFC 9113 §6.8 has the calls up
        to the last stream id finish. Streams the client opens after it are
        refused (RST_STREAM REFUSED_STREAM, :meth:`_refuse_late`).
        """
        if error_code != h2.errors.ErrorCodes.NO_ERROR:
            try:
                self._h2.close_connection(error_code, additional_data=detail.encode()[:256] or None)
            except h2.exceptions.ProtocolError:
                return
            self._collect()
            return
        if self.goaway_last is not None:
            return
        self._collect()  # what h2 queued goes first
        self.goaway_last = int(self._h2.highest_inbound_stream_id)
        self._out += _frames.goaway(
            error_code, detail.encode()[:256], last_stream_id=self.goaway_last
        )

    @property
    def held_bytes(self) -> int:
        """Message bytes this connection holds (received, not yet released)."""
        return 0 if self._budget is None else self._budget.held

    def dispose(self) -> None:
        """The connection is over: every byte it held goes back to the server's budget."""
        budget = self._budget
        if budget is not None and budget.held:
            budget.give(budget.held)

    def _finish(self, stream_id: int, stream: Stream) -> None:
        block = stream.trailers or []
        if stream.headers is None:
            block = [*_RESPONSE_HEADERS, *block]  # trailers-only
        del self._streams[stream_id]
        self._drop(stream)
        if stream.remote_open:
            self._states.quieten(stream_id)  # half-closed (local): the client may still send
        # No RST_STREAM(NO_ERROR) after the trailers for a client still sending: some
        # clients (grpclib) take it for a failed call. Its further DATA is dropped.
        try:
            self._h2.send_headers(stream_id, block, end_stream=True)
        except h2.exceptions.ProtocolError:
            return
        self._collect()

    # ---- receiving -----------------------------------------------------------

    @property
    def preface_received(self) -> bool:
        """Whether the client's whole preface (the 24 magic bytes) has arrived."""
        return len(self._preface) == len(PREFACE)

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes read from the client; returns what happened, in order.

        Raises:
            ProtocolFailure: the client broke HTTP/2 or a limit (a GOAWAY with
                its code is queued; write it, then close the connection).
        """
        out: list[Event] = []
        if len(self._preface) < len(PREFACE):
            data = self._take_preface(data)
            if not data:
                return out
        if (
            # The hot path: the read is exactly one DATA frame carrying a message that
            # does not end its stream (a Join request), nothing buffered before it.
            data[3:5] == b"\x00\x00"
            and len(data) > 14
            and int.from_bytes(data[:3], "big") + 9 == len(data)
            and not self._splitter.partial
            and self._header_block < 0
        ):
            self._on_data_frame(int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, 0, data[9:], out)
            return out
        self._split(data, out)
        return out

    def _take_preface(self, data: bytes) -> bytes:
        need = len(PREFACE) - len(self._preface)
        self._preface += data[:need]
        if not PREFACE.startswith(self._preface):
            self._fail(h2.errors.ErrorCodes.PROTOCOL_ERROR, "not an HTTP/2 client preface")
        if len(self._preface) < len(PREFACE):
            return b""
        self._feed_h2(PREFACE, [])
        return data[need:]

    def _refuse_late(self, stream_id: int) -> None:
        """A stream opened after our graceful GOAWAY: refused, never processed (the
        client may retry it elsewhere); its DATA is dropped, its window credited."""
        try:
            self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
        except h2.exceptions.ProtocolError:
            return
        self._states.quieten(stream_id)
        self._collect()

    def _refuse(
        self, stream_id: int, stream: Stream, error: FramingError | None, out: list[Event]
    ) -> None:
        stream.refused = True
        stream.taking = False
        if error is None:
            status, text = GrpcStatus.RESOURCE_EXHAUSTED, "messages in flight over the budget"
        elif "compressed" in str(error):
            status, text = GrpcStatus.UNIMPLEMENTED, str(error)
        else:
            status, text = GrpcStatus.RESOURCE_EXHAUSTED, str(error)
        out.append(MessageRefused(stream_id, status, text))

    def _on_h2_event(self, event: h2.events.Event, out: list[Event]) -> None:
        if isinstance(event, h2.events.RequestReceived):
            stream_id = int(event.stream_id)
            if self.goaway_last is not None and stream_id > self.goaway_last:
                self._refuse_late(stream_id)
                return
            self._streams[stream_id] = Stream(stream_id, self._stream_initial, self._max_message)
            headers = cast("list[tuple[str, str]]", list(event.headers or ()))
            out.append(RequestReceived(stream_id, headers))
        elif isinstance(event, h2.events.DataReceived):
            self._on_final_data(event, out)
        elif isinstance(event, (h2.events.StreamEnded, h2.events.TrailersReceived)):
            stream_id = int(event.stream_id or 0)
            stream = self._streams.get(stream_id)
            if stream is None:
                self._states.forget(stream_id)  # the client is done sending on it
            elif stream.remote_open:
                stream.remote_open = stream.taking = False
                out.append(RequestEnded(stream_id))
        elif isinstance(event, h2.events.StreamReset):
            stream_id = int(event.stream_id or 0)
            stream = self._streams.pop(stream_id, None)
            if not event.remote_reset:
                self._states.quieten(stream_id)  # h2 reset it (a frame the stream cannot take)
            elif stream is None:
                self._states.forget(stream_id)
            if stream is not None:
                self._drop(stream)
                code = int(event.error_code or 0)
                out.append(StreamReset(stream_id, code, "reset by the client"))
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._on_terminated(event, out)
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._on_settings(event)
