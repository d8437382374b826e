"""The client side of gRPC over HTTP/2 as a state machine: bytes in, events out.

:class:`ClientCore` drives ``h2.connection.H2Connection`` through its public
API only and adds gRPC on top: request headers, message framing, statuses,
flow control for sends larger than the peer's window (the rest waits in the
core and goes out as WINDOW_UPDATEs arrive). It does no I/O: the transport
writes :meth:`ClientCore.data_to_send` to its socket and feeds what it reads
to :meth:`ClientCore.receive_data`.
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from ._events import (
    ConnectionTerminated,
    Event,
    MessageReceived,
    PingAcknowledged,
    ResponseHeaders,
    StreamEnded,
    StreamReset,
)
from ._grpc import FramingError, GrpcStatus, MessageReader, frame, status_from_headers

__all__ = ["DEFAULT_WINDOW", "ClientCore", "NotHttp2", "ProtocolFailure"]

#: Stream and connection receive windows: large, so image observations keep flowing.
DEFAULT_WINDOW = 16 * 1024 * 1024

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


class ProtocolFailure(Exception):
    """The peer broke HTTP/2; the connection cannot be used any more."""


class NotHttp2(ProtocolFailure):
    """The peer answered, but not in HTTP/2 (an HTTP/1 server, say)."""


class _Stream:
    __slots__ = ("ended", "headers", "owed", "pending", "reader", "trailers", "want_end")

    def __init__(self) -> None:
        self.owed = 0  # received bytes not yet acknowledged to the peer
        self.reader = MessageReader()
        self.pending = bytearray()  # framed bytes waiting for flow-control window
        self.want_end = False  # end the stream once ``pending`` is out
        self.headers: list[tuple[str, str]] | None = None
        self.trailers: list[tuple[str, str]] | None = None
        self.ended = False


class ClientCore:
    """One client HTTP/2 connection carrying gRPC calls. No I/O, no event loop.

    Call :meth:`initiate` first, then send :meth:`data_to_send` to the peer.
    Every method that changes state may queue bytes; the caller writes them.
    """

    def __init__(self, *, window: int = DEFAULT_WINDOW) -> None:
        # Outbound headers go as given: metadata such as a token must reach the
        # peer byte for byte (h2's normalisation would strip its whitespace).
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
        self._h2 = h2.connection.H2Connection(config)
        self._window = window
        self._streams: dict[int, _Stream] = {}
        self._out = bytearray()
        self._heard_from_peer = False
        # Received data is acknowledged in batches (each acknowledgement is a trip
        # through h2's window bookkeeping; h2 only emits WINDOW_UPDATE for large
        # amounts anyway). The total owed across streams stays under a quarter of
        # the connection window, so the peer never stalls on it.
        self._owed_total = 0
        self._ack_threshold = max(1, window // 4)
        self.terminated: ConnectionTerminated | None = None

    # ---- sending -------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the connection preface and our settings (large receive windows)."""
        h2c = self._h2
        h2c.initiate_connection()
        h2c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self._window})
        grow = self._window - h2c.inbound_flow_control_window
        if grow > 0:
            h2c.increment_flow_control_window(grow)
        self._collect()

    def data_to_send(self) -> bytes:
        """Every byte queued for the peer since the last call (``b""`` if none)."""
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    @property
    def wants_write(self) -> bool:
        """Whether :meth:`data_to_send` has bytes."""
        return bool(self._out)

    @property
    def open_streams(self) -> int:
        return len(self._streams)

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
        self._streams[stream_id] = _Stream()
        self._collect()
        return stream_id

    def send_message(
        self, stream_id: int, payload: bytes | bytearray, *, end: bool = False
    ) -> None:
        """Queue one gRPC message on the stream (and end our side after it, if ``end``).

        What the peer's flow-control window does not admit now waits in the
        core and goes out as the window opens.

        Raises:
            ProtocolFailure: the stream or the connection is gone.
        """
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            raise ProtocolFailure(f"stream {stream_id} is not open for sending")
        data = frame(payload)
        h2c = self._h2
        if not stream.pending and len(data) <= h2c.max_outbound_frame_size:
            try:
                if len(data) <= h2c.local_flow_control_window(stream_id):
                    h2c.send_data(stream_id, data, end_stream=end)
                    self._out += h2c.data_to_send()
                    if end:
                        stream.want_end = True
                    return
            except h2.exceptions.ProtocolError as exc:
                raise ProtocolFailure(f"cannot send on stream {stream_id}: {exc}") from exc
        stream.pending += data
        stream.want_end = end
        self._push(stream_id, stream)
        self._collect()

    def end_stream(self, stream_id: int) -> None:
        """Half-close: no more messages from us on this stream (after any still queued)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            return
        stream.want_end = True
        self._push(stream_id, stream)
        self._collect()

    def reset_stream(self, stream_id: int, error_code: int = h2.errors.ErrorCodes.CANCEL) -> None:
        """Abandon a stream (RST_STREAM). A no-op for a stream already gone."""
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return
        if stream.owed:
            self._acknowledge(stream_id, stream)
        try:
            self._h2.reset_stream(stream_id, error_code)
        except h2.exceptions.ProtocolError:
            return  # already closed on the h2 side: nothing to tell the peer
        self._collect()

    def ping(self, opaque: bytes) -> None:
        """Queue a PING carrying 8 bytes of ``opaque`` data."""
        self._h2.ping(opaque)
        self._collect()

    def close(self, error_code: int = h2.errors.ErrorCodes.NO_ERROR) -> None:
        """Queue GOAWAY: we are done with the connection."""
        try:
            self._h2.close_connection(error_code)
        except h2.exceptions.ProtocolError:
            return
        self._collect()

    def _push(self, stream_id: int, stream: _Stream) -> None:
        """Move queued bytes into h2 as far as the windows allow (and the end, once empty)."""
        h2c = self._h2
        try:
            while stream.pending:
                room = min(h2c.local_flow_control_window(stream_id), h2c.max_outbound_frame_size)
                if room <= 0:
                    return
                chunk = bytes(stream.pending[:room])
                del stream.pending[:room]
                last = not stream.pending and stream.want_end
                h2c.send_data(stream_id, chunk, end_stream=last)
                if last:
                    return
            if stream.want_end:
                h2c.end_stream(stream_id)
        except h2.exceptions.ProtocolError:
            stream.pending.clear()  # the stream closed under us; its end event follows

    def _push_all(self) -> None:
        for stream_id, stream in list(self._streams.items()):
            if stream.pending:
                self._push(stream_id, stream)

    def _collect(self) -> None:
        self._out += self._h2.data_to_send()

    # ---- receiving -----------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes read from the peer; returns what happened, in order.

        Raises:
            NotHttp2: the peer's first bytes are not HTTP/2.
            ProtocolFailure: the peer broke HTTP/2 (the connection is unusable).
        """
        if not self._heard_from_peer:
            if data[:5] == b"HTTP/" or (data and data[:1] not in (b"\x00",)):
                raise NotHttp2("the peer answered in HTTP/1, not HTTP/2")
            self._heard_from_peer = True
        try:
            h2_events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            raise ProtocolFailure(f"HTTP/2 protocol error from the peer: {exc}") from exc
        out: list[Event] = []
        for event in h2_events:
            if isinstance(event, h2.events.DataReceived):
                self._on_data(event, out)
            else:
                self._on_other(event, out)
        self._collect()
        return out

    def _on_data(self, event: h2.events.DataReceived, out: list[Event]) -> None:
        stream_id = event.stream_id
        size = event.flow_controlled_length or 0
        stream = self._streams.get(stream_id)
        if stream is None:
            if size:
                self._h2.acknowledge_received_data(size, stream_id)
            return
        if size:
            stream.owed += size
            self._owed_total += size
            if self._owed_total >= self._ack_threshold:
                self._acknowledge_all()
        if event.data is None:
            return
        try:
            messages = stream.reader.feed(event.data)
        except FramingError as exc:
            self.reset_stream(stream_id)
            out.append(StreamReset(stream_id, h2.errors.ErrorCodes.CANCEL, str(exc)))
            return
        for message in messages:
            out.append(MessageReceived(stream_id, message))

    def _acknowledge_all(self) -> None:
        for stream_id, stream in self._streams.items():
            if stream.owed:
                self._acknowledge(stream_id, stream)

    def _acknowledge(self, stream_id: int, stream: _Stream) -> None:
        owed, stream.owed = stream.owed, 0
        self._owed_total -= owed
        # For a stream h2 already closed this still credits the connection window.
        self._h2.acknowledge_received_data(owed, stream_id)

    def _on_other(self, event: h2.events.Event, out: list[Event]) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self._on_headers(event.stream_id, _text_headers(event.headers), out)
        elif isinstance(event, h2.events.TrailersReceived):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.trailers = _text_headers(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            self._on_end(event.stream_id, out)
        elif isinstance(event, h2.events.StreamReset):
            stream = self._streams.pop(event.stream_id, None)
            if stream is not None:
                if stream.owed:
                    self._acknowledge(event.stream_id, stream)
                code = int(event.error_code or 0)
                out.append(StreamReset(event.stream_id, code, _reset_detail(code)))
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.terminated = ConnectionTerminated(
                int(event.error_code or 0),
                int(event.last_stream_id or 0),
                bytes(event.additional_data or b""),
            )
            out.append(self.terminated)
        elif isinstance(event, h2.events.PingAckReceived):
            out.append(PingAcknowledged(bytes(event.ping_data or b"")))
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._push_all()

    def _on_headers(self, stream_id: int, headers: list[tuple[str, str]], out: list[Event]) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        stream.headers = headers
        out.append(ResponseHeaders(stream_id, headers))

    def _on_end(self, stream_id: int, out: list[Event]) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return
        if stream.owed:
            self._acknowledge(stream_id, stream)
        found = status_from_headers(stream.trailers or ())
        if found is None and stream.headers is not None:
            found = status_from_headers(stream.headers) or _http_status(stream.headers)
        if stream.reader.partial and (found is None or found[0] is GrpcStatus.OK):
            found = (GrpcStatus.INTERNAL, "the stream ended inside a message")
        status, message = found if found is not None else (None, None)
        out.append(StreamEnded(stream_id, status, message))


def _text_headers(headers: object) -> list[tuple[str, str]]:
    out = []
    for name, value in headers:  # type: ignore[attr-defined]
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        out.append((name, value))
    return out


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
