"""The client side of gRPC over HTTP/2 as a state machine: bytes in, events out.

:class:`ClientCore` drives h2's public API for the connection and stream
lifecycle; DATA framing and flow control are the shared half
(:class:`~._h2base.H2Base`).
"""

from __future__ import annotations

from typing import cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from ._events import (
    ConnectionTerminated,
    Event,
    PingAcknowledged,
    ResponseHeaders,
    StreamEnded,
    StreamReset,
)
from ._grpc import MAX_MESSAGE_BYTES, FramingError, GrpcStatus, status_from_headers
from ._h2base import WINDOW, H2Base, ProtocolFailure, Stream
from ._limits import ServerLimits

__all__ = ["ClientCore", "NotHttp2", "ProtocolFailure"]

_LIMITS = ServerLimits()

#: HTTP statuses with a gRPC meaning (the gRPC HTTP-to-status mapping).
_HTTP_STATUS = {
    "400": GrpcStatus.INTERNAL,
    "401": GrpcStatus.UNAUTHENTICATED,
    "403": GrpcStatus.PERMISSION_DENIED,
    "404": GrpcStatus.UNIMPLEMENTED,
    "429": GrpcStatus.UNAVAILABLE,
    "502": GrpcStatus.UNAVAILABLE,
    "503": GrpcStatus.UNAVAILABLE,
    "504": GrpcStatus.UNAVAILABLE,
}


class NotHttp2(ProtocolFailure):
    """The peer answered, but not in HTTP/2 (an HTTP/1 server, say)."""


class ClientCore(H2Base):
    """One client HTTP/2 connection carrying gRPC calls. No I/O, no event loop.

    Call :meth:`initiate` first, then send :meth:`data_to_send` to the peer.
    The server's frames are rationed by ``limits``' frame budgets and header-list
    size (their defaults unless given), as a server rations a client's.
    Every method that changes state may queue bytes; the caller writes them.
    A frame header over our frame size or a message prefix over 256 MiB is
    refused before its payload is kept.
    """

    def __init__(self, limits: ServerLimits | None = None) -> None:
        # Outbound headers go as given: metadata such as a token must reach the
        # peer byte for byte (h2's normalisation would strip its whitespace).
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
        # A server's frames are rationed by the same named budgets as a client's
        # (ServerLimits' defaults): a flood ends the connection ENHANCE_YOUR_CALM.
        super().__init__(h2.connection.H2Connection(config), None, limits or _LIMITS)
        self._heard_from_peer = False
        self.terminated: ConnectionTerminated | None = None

    # ---- sending -------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the connection preface and our settings (large receive windows)."""
        h2c = self._h2
        h2c.initiate_connection()
        # No server push: gRPC has none, and a stream only the server opened would be
        # one our DATA rules call idle.
        codes = h2.settings.SettingCodes
        h2c.update_settings({codes.INITIAL_WINDOW_SIZE: WINDOW, codes.ENABLE_PUSH: 0})
        h2c.increment_flow_control_window(WINDOW - h2c.inbound_flow_control_window)
        self._collect()

    def open_stream(self, headers: list[tuple[str, str]]) -> int:
        """Open a stream with request ``headers``; returns its id.

        Raises:
            ProtocolFailure: the connection is closing (GOAWAY) or closed.
        """
        if self.terminated is not None:
            raise ProtocolFailure("the server is closing the connection (GOAWAY)")
        h2c = self._h2
        try:
            stream_id = h2c.get_next_available_stream_id()
            h2c.send_headers(stream_id, headers)
        except h2.exceptions.ProtocolError as exc:
            raise ProtocolFailure(f"cannot open a stream: {exc}") from exc
        stream = self._streams[stream_id] = Stream(
            stream_id, self._stream_initial, MAX_MESSAGE_BYTES
        )
        stream.taking = False  # until the response's headers are in
        self._states.opened_high = stream_id
        self._collect()
        return stream_id

    def end_stream(self, stream_id: int) -> None:
        """Half-close: no more messages from us on this stream (after any still queued)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            return
        stream.want_end = True
        self._push(stream_id, stream)

    def ping(self, opaque: bytes) -> bool:
        """Queue a PING carrying 8 bytes of ``opaque`` data; ``False`` (nothing queued) once
        the connection is closed (GOAWAY sent or received), where HTTP/2 allows no PING."""
        try:
            self._h2.ping(opaque)
        except h2.exceptions.ProtocolError:
            return False
        self._collect()
        return True

    def close(self, error_code: int = h2.errors.ErrorCodes.NO_ERROR) -> None:
        """Queue GOAWAY: we are done with the connection."""
        try:
            self._h2.close_connection(error_code)
        except h2.exceptions.ProtocolError:
            return
        self._collect()

    def _finish(self, stream_id: int, stream: Stream) -> None:
        try:
            self._h2.end_stream(stream_id)  # an empty DATA frame: no window needed
        except h2.exceptions.ProtocolError:
            return  # the stream already closed under us; its end event follows
        self._collect()

    # ---- receiving -----------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes read from the peer; returns what happened, in order.

        Raises:
            NotHttp2: the peer's first bytes are not HTTP/2.
            ProtocolFailure: the peer broke HTTP/2 (the connection is unusable;
                a GOAWAY saying why is queued).
        """
        out: list[Event] = []
        if not self._heard_from_peer:
            if data[:5] == b"HTTP/" or (data and data[:1] != b"\x00"):
                raise NotHttp2("the peer answered in HTTP/1, not HTTP/2")
            self._heard_from_peer = True
        elif (
            # The hot path: the read is exactly one DATA frame that does not end its
            # stream (a Join reply), with nothing buffered from an earlier read.
            data[3:5] == b"\x00\x00"
            and int.from_bytes(data[:3], "big") + 9 == len(data)
            and not self._splitter.partial
            and self._header_block < 0
        ):
            self._on_data_frame(int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, 0, data[9:], out)
            return out
        self._split(data, out)
        return out

    def _refuse(
        self, stream_id: int, stream: Stream, error: FramingError | None, out: list[Event]
    ) -> None:
        self.reset_stream(stream_id)
        out.append(StreamReset(stream_id, h2.errors.ErrorCodes.CANCEL, str(error)))

    def _on_h2_event(self, event: h2.events.Event, out: list[Event]) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.headers = _text_headers(event)
                stream.taking = True
                out.append(ResponseHeaders(event.stream_id, stream.headers))
        elif isinstance(event, h2.events.TrailersReceived):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.trailers = _text_headers(event)
        elif isinstance(event, h2.events.DataReceived):
            self._on_final_data(event, out)
        elif isinstance(event, h2.events.StreamEnded):
            self._on_end(event.stream_id, out)
        elif isinstance(event, h2.events.StreamReset):
            if not event.remote_reset:
                self._states.quieten(event.stream_id)  # h2 reset it (a frame it cannot take)
            if self._streams.pop(event.stream_id, None) is not None:
                code = int(event.error_code or 0)
                out.append(StreamReset(event.stream_id, code, _reset_detail(code)))
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._on_terminated(event, out)
        elif isinstance(event, h2.events.PingAckReceived):
            out.append(PingAcknowledged(bytes(event.ping_data or b"")))
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._on_settings(event)

    def _on_end(self, stream_id: int, out: list[Event]) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return
        found = status_from_headers(stream.trailers or ())
        if found is None and stream.headers is not None:
            found = status_from_headers(stream.headers) or _http_status(stream.headers)
        if stream.reader.partial and (found is None or found[0] is GrpcStatus.OK):
            found = (GrpcStatus.INTERNAL, "the stream ended inside a message")
        status, message = found if found is not None else (None, None)
        out.append(StreamEnded(stream_id, status, message))


def _text_headers(
    event: h2.events.ResponseReceived | h2.events.TrailersReceived,
) -> list[tuple[str, str]]:
    # With a header_encoding configured, h2 hands the headers over as text already.
    return cast("list[tuple[str, str]]", list(event.headers or ()))


def _http_status(headers: list[tuple[str, str]]) -> tuple[GrpcStatus, str | None] | None:
    """A gRPC status for a response that carries none (an HTTP error, or no content-type)."""
    code = dict(headers).get(":status", "")
    if code == "200":
        return None
    return _HTTP_STATUS.get(code, GrpcStatus.UNKNOWN), f"HTTP status {code or 'missing'}"


def _reset_detail(code: int) -> str:
    try:
        name = h2.errors.ErrorCodes(code).name
    except ValueError:
        name = str(code)
    return f"stream reset by the peer ({name})"
