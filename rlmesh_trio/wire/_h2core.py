"""The client side of gRPC over HTTP/2 as a state machine: bytes in, events out.

:class:`ClientCore` drives h2's public API for the connection and stream
lifecycle and frames the hot part itself: DATA frames both ways and their
WINDOW_UPDATEs (:mod:`._frames`), with flow control as plain arithmetic here.
h2 never sees those (except a DATA frame that ends a stream, which it must),
so its own windows are never used and never drift.
"""

from __future__ import annotations

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
    MessageReceived,
    PingAcknowledged,
    ResponseHeaders,
    StreamEnded,
    StreamReset,
)
from ._grpc import FramingError, GrpcStatus, MessageReader, frame, status_from_headers

__all__ = ["ClientCore", "NotHttp2", "ProtocolFailure"]

#: Stream and connection receive windows: large, so image observations keep flowing.
_WINDOW = 16 * 1024 * 1024
#: HTTP/2's initial flow-control window (before the peer's SETTINGS say otherwise).
_INITIAL_WINDOW = 65535
_MAX_WINDOW = 2**31 - 1

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
    __slots__ = ("head", "headers", "owed", "pending", "reader", "trailers", "want_end", "window")

    def __init__(self, stream_id: int, window: int) -> None:
        # What follows the length in a DATA frame of one whole message: type, flags,
        # stream id, then the gRPC prefix's compressed flag.
        self.head = _frames.data_frame_header(stream_id, 0)[3:] + b"\x00"
        self.reader = MessageReader()
        self.window = window  # what the peer lets us send on this stream
        self.owed = 0  # received bytes not yet credited back to the peer
        self.pending = bytearray()  # framed bytes waiting for flow-control window
        self.want_end = False  # end the stream once ``pending`` is out
        self.headers: list[tuple[str, str]] | None = None
        self.trailers: list[tuple[str, str]] | None = None


class ClientCore:
    """One client HTTP/2 connection carrying gRPC calls. No I/O, no event loop.

    Call :meth:`initiate` first, then send :meth:`data_to_send` to the peer.
    Every method that changes state may queue bytes; the caller writes them.
    """

    def __init__(self) -> None:
        # Outbound headers go as given: metadata such as a token must reach the
        # peer byte for byte (h2's normalisation would strip its whitespace).
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding="utf-8",
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
        self._h2 = h2.connection.H2Connection(config)
        self._streams: dict[int, _Stream] = {}
        self._out = bytearray()
        self._splitter = _frames.FrameSplitter()
        self._heard_from_peer = False
        # Our SETTINGS_MAX_FRAME_SIZE: never changed from h2's default, so read once.
        self._max_frame = self._h2.local_settings.max_frame_size
        self._send_window = _INITIAL_WINDOW  # the peer's connection window for us
        self._stream_initial = _INITIAL_WINDOW  # its SETTINGS_INITIAL_WINDOW_SIZE
        # Received data is credited back in batches; the total owed across streams
        # stays under a quarter of our window, so the peer never stalls on it.
        self._owed_total = 0
        self._ack_threshold = _WINDOW // 4
        self.terminated: ConnectionTerminated | None = None

    # ---- sending -------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the connection preface and our settings (large receive windows)."""
        h2c = self._h2
        h2c.initiate_connection()
        h2c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: _WINDOW})
        h2c.increment_flow_control_window(_WINDOW - h2c.inbound_flow_control_window)
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
        self._streams[stream_id] = _Stream(stream_id, self._stream_initial)
        self._collect()
        return stream_id

    def send_message(
        self, stream_id: int, payload: bytes | bytearray, *, end: bool = False
    ) -> None:
        """Queue one gRPC message on the stream (and end our side after it, if ``end``).

        What the peer's flow-control windows do not admit now waits in the
        core and goes out as they open.

        Raises:
            ProtocolFailure: the stream or the connection is gone.
        """
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            raise ProtocolFailure(f"stream {stream_id} is not open for sending")
        length = len(payload)
        size = length + 5
        if (
            not stream.pending
            and size <= stream.window
            and size <= self._send_window
            and size <= self._h2.max_outbound_frame_size
        ):
            # The hot path: one DATA frame with the gRPC prefix, written here.
            stream.window -= size
            self._send_window -= size
            out = self._out
            out += size.to_bytes(3, "big") + stream.head + length.to_bytes(4, "big")
            out += payload
            if not end:
                return
        else:
            stream.pending += frame(payload)
        if end:
            stream.want_end = True
        self._push(stream_id, stream)

    def end_stream(self, stream_id: int) -> None:
        """Half-close: no more messages from us on this stream (after any still queued)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.want_end:
            return
        stream.want_end = True
        self._push(stream_id, stream)

    def reset_stream(self, stream_id: int, error_code: int = h2.errors.ErrorCodes.CANCEL) -> None:
        """Abandon a stream (RST_STREAM). A no-op for a stream already gone."""
        if self._streams.pop(stream_id, None) is None:
            return
        try:
            self._h2.reset_stream(stream_id, error_code)
        except h2.exceptions.ProtocolError:
            return  # already closed on the h2 side: nothing to tell the peer
        self._collect()

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

    def _push(self, stream_id: int, stream: _Stream) -> None:
        """Send queued bytes as far as the windows allow, then the end once all is out."""
        pending = stream.pending
        while pending:
            room = min(stream.window, self._send_window, self._h2.max_outbound_frame_size)
            if room <= 0:
                return
            chunk = bytes(pending[:room])
            del pending[:room]
            stream.window -= len(chunk)
            self._send_window -= len(chunk)
            self._out += _frames.data_frame_header(stream_id, len(chunk))
            self._out += chunk
        if stream.want_end:
            try:
                self._h2.end_stream(stream_id)  # an empty DATA frame: no window needed
            except h2.exceptions.ProtocolError:
                return  # the stream already closed under us; its end event follows
            self._collect()

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
            if data[:5] == b"HTTP/" or (data and data[:1] != b"\x00"):
                raise NotHttp2("the peer answered in HTTP/1, not HTTP/2")
            self._heard_from_peer = True
        elif (
            # The hot path: the read is exactly one DATA frame that does not end its
            # stream (a Join reply), with nothing buffered from an earlier read.
            data[3:5] == b"\x00\x00"
            and int.from_bytes(data[:3], "big") + 9 == len(data)
            and not self._splitter.partial
        ):
            out: list[Event] = []
            self._on_data_frame(int.from_bytes(data[5:9], "big") & 0x7FFFFFFF, 0, data[9:], out)
            return out
        buffer, frames = self._splitter.feed(data)
        out = []
        to_h2_from = -1  # start of a run of frames for h2, not yet fed
        for kind, flags, stream_id, start, end in frames:
            # Ours: WINDOW_UPDATEs and DATA that does not end its stream; h2's: the rest.
            if kind != _frames.WINDOW_UPDATE and (
                kind != _frames.DATA or flags & _frames.END_STREAM
            ):
                if to_h2_from < 0:
                    to_h2_from = start
                continue
            if to_h2_from >= 0:
                self._feed_h2(buffer[to_h2_from:start], out)
                to_h2_from = -1
            if kind == _frames.DATA:
                self._on_data_frame(stream_id, flags, buffer[start + 9 : end], out)
            else:
                self._on_window_update(stream_id, buffer[start + 9 : end])
        if to_h2_from >= 0:
            self._feed_h2(buffer[to_h2_from : frames[-1][4]], out)
        self._collect()
        return out

    def _feed_h2(self, data: bytes, out: list[Event]) -> None:
        try:
            h2_events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            raise ProtocolFailure(f"HTTP/2 protocol error from the peer: {exc}") from exc
        # h2's replies first (a SETTINGS ACK above all): DATA sent on a window the
        # new settings open must follow the ACK, or the peer has not applied them yet.
        self._collect()
        for event in h2_events:
            self._on_h2_event(event, out)

    def _on_data_frame(self, stream_id: int, flags: int, payload: bytes, out: list[Event]) -> None:
        if len(payload) > self._max_frame:
            raise ProtocolFailure(f"a DATA frame of {len(payload)} bytes is over our frame size")
        credit = len(payload)
        if flags & _frames.PADDED:
            if not payload or payload[0] >= len(payload):
                raise ProtocolFailure("a DATA frame with bad padding")
            payload = payload[1 : len(payload) - payload[0]]
        self._owed_total += credit
        stream = self._streams.get(stream_id)
        if stream is not None:
            stream.owed += credit
            if (
                # The hot path: the frame is exactly one whole message, nothing buffered.
                len(payload) >= 5
                and payload[0] == 0
                and int.from_bytes(payload[1:5], "big") + 5 == len(payload)
                and not stream.reader.partial
            ):
                out.append(MessageReceived(stream_id, payload[5:]))
            elif payload:
                self._feed_stream(stream_id, stream, payload, out)
        if self._owed_total >= self._ack_threshold:
            self._credit_all()

    def _feed_stream(self, stream_id: int, stream: _Stream, data: bytes, out: list[Event]) -> None:
        try:
            messages = stream.reader.feed(data)
        except FramingError as exc:
            self.reset_stream(stream_id)
            out.append(StreamReset(stream_id, h2.errors.ErrorCodes.CANCEL, str(exc)))
            return
        for message in messages:
            out.append(MessageReceived(stream_id, message))

    def _credit_all(self) -> None:
        for stream_id, stream in self._streams.items():
            if stream.owed:
                self._out += _frames.window_update(stream_id, stream.owed)
                stream.owed = 0
        if self._owed_total:
            self._out += _frames.window_update(0, self._owed_total)
            self._owed_total = 0

    def _on_window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ProtocolFailure("a WINDOW_UPDATE frame of the wrong size")
        increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0 or self._send_window + increment > _MAX_WINDOW:
                raise ProtocolFailure("a bad connection WINDOW_UPDATE")
            self._send_window += increment
            self._push_all()
            return
        stream = self._streams.get(stream_id)
        if stream is None:
            return  # a stream that is gone: nothing to send on it
        if increment == 0 or stream.window + increment > _MAX_WINDOW:
            self.reset_stream(stream_id, h2.errors.ErrorCodes.FLOW_CONTROL_ERROR)
            return
        stream.window += increment
        if stream.pending:
            self._push(stream_id, stream)

    def _on_h2_event(self, event: h2.events.Event, out: list[Event]) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.headers = _text_headers(event)
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
            if self._streams.pop(event.stream_id, None) is not None:
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
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._on_settings(event)

    def _on_final_data(self, event: h2.events.DataReceived, out: list[Event]) -> None:
        # A DATA frame that ends the stream went through h2 (its stream state must
        # know); h2 debited its own window for it, so credit it back through h2.
        if event.flow_controlled_length:
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        stream = self._streams.get(event.stream_id)
        if stream is not None and event.data:
            self._feed_stream(event.stream_id, stream, event.data, out)

    def _on_settings(self, event: h2.events.RemoteSettingsChanged) -> None:
        changed = event.changed_settings.get(h2.settings.SettingCodes.INITIAL_WINDOW_SIZE)
        if changed is None:
            return
        new = int(changed.new_value)
        delta = new - self._stream_initial
        self._stream_initial = new
        for stream in self._streams.values():
            stream.window += delta
        self._push_all()

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
