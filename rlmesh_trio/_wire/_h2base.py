"""What both ends of the wire core share: DATA framing and flow control, done by hand.

h2's public API drives the connection and stream lifecycle; the hot part is
ours (:mod:`._frames`): DATA frames both ways and their WINDOW_UPDATEs, with
flow control as plain arithmetic here. h2 never sees those (except a DATA
frame that ends a stream, which it must), so its own windows are never used
and never drift. :class:`~._h2core.ClientCore` and
:class:`~._h2server.ServerCore` add what differs per side.

Those frames skip h2's state machine: what the peer may send on a stream, by
its state (RFC 9113 §5.1), is kept by :mod:`._streams`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn

import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack.exceptions

from . import _frames
from ._events import ConnectionTerminated, Event, MessageReceived, StreamReset
from ._grpc import FramingError, MessageReader, frame
from ._limits import ByteBudget, RateBudget, ServerLimits
from ._streams import Stream, StreamStates

__all__ = ["INITIAL_WINDOW", "WINDOW", "H2Base", "ProtocolFailure", "Stream"]

#: Stream and connection receive windows: large, so image observations keep flowing.
WINDOW = 16 * 1024 * 1024
#: HTTP/2's initial flow-control window (before the peer's SETTINGS say otherwise).
INITIAL_WINDOW = 65535
MAX_WINDOW = 2**31 - 1
_DEFAULT_LIMITS = ServerLimits()
_CALM = h2.errors.ErrorCodes.ENHANCE_YOUR_CALM
#: A WINDOW_UPDATE after at least this many DATA bytes from us is not rationed.
_USEFUL_UPDATE = 1024
_PROTOCOL = h2.errors.ErrorCodes.PROTOCOL_ERROR


class ProtocolFailure(Exception):
    """The peer broke HTTP/2; the connection cannot be used any more."""


class H2Base:
    """The shared half of one HTTP/2 connection carrying gRPC. No I/O, no event loop.

    ``budget`` (servers) holds every received message byte until
    :meth:`release` gives it back; a message that does not fit is refused
    (:meth:`_refuse`).
    """

    #: The peer's GOAWAY, once one came.
    terminated: ConnectionTerminated | None

    def __init__(
        self,
        h2c: h2.connection.H2Connection,
        budget: ByteBudget | None,
        limits: ServerLimits = _DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._h2 = h2c
        self._clock = clock
        now = clock()

        def rate(size: float) -> RateBudget:
            return RateBudget(size, size / limits.refill_seconds, now)

        # The same budgets on both ends: a hostile server floods as cheaply as a client.
        self._rates = {
            _frames.RST_STREAM: rate(limits.reset_budget),
            _frames.SETTINGS: rate(limits.settings_budget),
            _frames.PING: rate(limits.ping_budget),
            _frames.DATA: rate(limits.empty_data_budget),
            _frames.WINDOW_UPDATE: rate(limits.window_update_budget),
        }
        # Bytes of a header block still awaiting its END_HEADERS (-1: none).
        self._header_block = -1
        self._max_block = int(limits.max_header_list_size) + 1024
        #: A reset budget shared with other connections (a server's), spent as well as
        #: this connection's own: a client that reconnects gets no fresh budget from it.
        self.shared_resets: RateBudget | None = None
        self._streams: dict[int, Stream] = {}
        self._states = StreamStates()  # what the table does not hold (see _streams)
        self._out = bytearray()
        self._max_frame = h2c.local_settings.max_frame_size
        self._splitter = _frames.FrameSplitter(self._max_frame)
        self._send_window = INITIAL_WINDOW  # the peer's connection window for us
        self._stream_initial = INITIAL_WINDOW  # its SETTINGS_INITIAL_WINDOW_SIZE
        # Received data is credited back in batches; the total owed across streams
        # stays under a quarter of our window, so the peer never stalls on it.
        self._owed_total = 0
        self._ack_threshold = WINDOW // 4
        self._budget = budget
        #: DATA bytes sent since the peer's last WINDOW_UPDATE: an update that follows
        #: data is doing its job, one that follows none is only work for us.
        self.sent_since_update = 0

    # ---- sending -------------------------------------------------------------

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
            self.sent_since_update += size
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

    def pending_bytes(self, stream_id: int) -> int:
        """Framed bytes of the stream waiting for the peer's window."""
        stream = self._streams.get(stream_id)
        return 0 if stream is None else len(stream.pending)

    def _push(self, stream_id: int, stream: Stream) -> None:
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
            self.sent_since_update += len(chunk)
            self._out += _frames.data_frame_header(stream_id, len(chunk))
            self._out += chunk
        if stream.want_end:
            self._finish(stream_id, stream)

    def _finish(self, stream_id: int, stream: Stream) -> None:
        """End our side of the stream (everything queued is out)."""
        raise NotImplementedError

    def _push_all(self) -> None:
        for stream_id, stream in list(self._streams.items()):
            if stream.pending:
                self._push(stream_id, stream)

    def _collect(self) -> None:
        self._out += self._h2.data_to_send()

    # ---- receiving -----------------------------------------------------------

    def _split(self, data: bytes, out: list[Event]) -> None:
        """Cut ``data`` into frames; DATA and WINDOW_UPDATE are ours, the rest h2's.

        Raises:
            ProtocolFailure: the peer broke HTTP/2 (a GOAWAY is queued).
        """
        try:
            buffer, frames = self._splitter.feed(data)
        except _frames.FrameTooLarge as exc:
            self._fail(h2.errors.ErrorCodes.FRAME_SIZE_ERROR, str(exc))
        to_h2_from = -1  # start of a run of frames for h2, not yet fed
        for kind, flags, stream_id, start, end in frames:
            self._screen(kind, flags, stream_id, end - start - 9)
            # Ours: WINDOW_UPDATEs and DATA that does not end its stream; h2's: the rest,
            # and anything inside a header block (h2 refuses all but its CONTINUATIONs).
            if self._header_block >= 0 or (
                kind != _frames.WINDOW_UPDATE
                and (kind != _frames.DATA or flags & _frames.END_STREAM)
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
                self._on_window_update(stream_id, buffer[start + 9 : end], out)
        if to_h2_from >= 0:
            self._feed_h2(buffer[to_h2_from : frames[-1][4]], out)
        self._collect()

    def _screen(self, kind: int, flags: int, stream_id: int, length: int) -> None:
        """Look at each frame's header before it is handled: frames that cost us work
        and do none are rationed, a header block is bounded, the streams the peer
        opens are counted (a RST_STREAM on an idle one is refused: h2 lets it pass).

        Raises:
            ProtocolFailure: past a budget (GOAWAY ENHANCE_YOUR_CALM is queued), or
                a RST_STREAM on an idle stream (GOAWAY PROTOCOL_ERROR).
        """
        if self._header_block >= 0:
            if kind != _frames.CONTINUATION:
                return  # h2 refuses anything else inside a header block
            self._header_block += length
            if self._header_block > self._max_block:
                self._fail(_CALM, "a header block over the header-list limit")
            if flags & _frames.END_HEADERS:
                self._header_block = -1
            return
        if kind == _frames.HEADERS or kind == _frames.PUSH_PROMISE:
            if not flags & _frames.END_HEADERS:
                self._header_block = length
            # A client's HEADERS opens its stream (h2 refuses one that cannot); counted
            # here, before h2 has seen it, for a RST_STREAM later in the same read.
            if kind == _frames.HEADERS and stream_id > self._states.opened_high:
                self._states.opened_high = stream_id
            return
        if kind == _frames.DATA:
            if length or flags & _frames.END_STREAM:
                return
        elif kind in (_frames.SETTINGS, _frames.PING):
            if flags & 0x1:  # an ACK answers us: not the peer's to ration
                return
        elif kind == _frames.WINDOW_UPDATE:
            sent, self.sent_since_update = self.sent_since_update, 0
            if sent >= _USEFUL_UPDATE:
                return  # it follows data we sent: flow control at work, not a flood
        elif kind != _frames.RST_STREAM:
            return
        elif self._states.idle(stream_id):
            self._fail(_PROTOCOL, f"RST_STREAM on idle stream {stream_id}")
        now = self._clock()
        if not self._rates[kind].spend(now) or (
            kind == _frames.RST_STREAM
            and self.shared_resets is not None
            and not self.shared_resets.spend(now)
        ):
            self._fail(_CALM, f"too many frames of type {kind} (a flood)")

    def _fail(self, code: int, detail: str) -> NoReturn:
        """Queue GOAWAY with ``code`` and give up on the connection.

        Raises:
            ProtocolFailure: always.
        """
        try:
            self._h2.close_connection(code, additional_data=detail.encode()[:256])
        except h2.exceptions.ProtocolError:
            pass
        self._collect()
        raise ProtocolFailure(detail)

    def _feed_h2(self, data: bytes, out: list[Event]) -> None:
        try:
            h2_events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            # h2 has queued its GOAWAY with the error's code: send it before giving up.
            # h2 answers a header block HPACK cannot decode with PROTOCOL_ERROR; RFC 9113
            # §4.3 asks COMPRESSION_ERROR, so that one GOAWAY's code is ours to set.
            queued = self._h2.data_to_send()
            if isinstance(exc.__cause__, hpack.exceptions.HPACKError) and not isinstance(
                exc, h2.exceptions.DenialOfServiceError
            ):
                queued = _frames.with_goaway_code(queued, h2.errors.ErrorCodes.COMPRESSION_ERROR)
            self._out += queued
            raise ProtocolFailure(f"HTTP/2 protocol error from the peer: {exc}") from exc
        # h2's replies first (a SETTINGS ACK above all): DATA sent on a window the
        # new settings open must follow the ACK, or the peer has not applied them yet.
        self._collect()
        for event in h2_events:
            self._on_h2_event(event, out)

    def _on_h2_event(self, event: h2.events.Event, out: list[Event]) -> None:
        raise NotImplementedError

    def _on_terminated(self, event: h2.events.ConnectionTerminated, out: list[Event]) -> None:
        """The peer's GOAWAY: kept as :attr:`terminated` and passed on."""
        self.terminated = ConnectionTerminated(
            int(event.error_code or 0),
            int(event.last_stream_id or 0),
            bytes(event.additional_data or b""),
        )
        out.append(self.terminated)

    def _on_data_frame(self, stream_id: int, flags: int, payload: bytes, out: list[Event]) -> None:
        if len(payload) > self._max_frame:
            self._fail(
                h2.errors.ErrorCodes.FRAME_SIZE_ERROR,
                f"a DATA frame of {len(payload)} bytes is over our frame size",
            )
        credit = len(payload)
        if flags & _frames.PADDED:
            if not payload or payload[0] >= len(payload):
                self._fail(h2.errors.ErrorCodes.PROTOCOL_ERROR, "a DATA frame with bad padding")
            payload = payload[1 : len(payload) - payload[0]]
        stream = self._streams.get(stream_id)
        if stream is None or not stream.taking:
            self._data_off_path(stream_id, stream, credit)
            return
        self._owed_total += credit
        stream.owed += credit
        if (
            # The hot path: the frame is exactly one whole message, nothing buffered.
            len(payload) >= 5
            and payload[0] == 0
            and int.from_bytes(payload[1:5], "big") + 5 == len(payload)
            and not stream.reader.partial
            and len(payload) - 5 <= stream.reader.limit
            and (self._budget is None or self._budget.take(len(payload)))
        ):
            out.append(MessageReceived(stream_id, payload[5:]))
        elif payload:
            self._feed_stream(stream_id, stream, payload, out)
        if self._owed_total >= self._ack_threshold:
            self._credit_all()

    def _data_off_path(self, stream_id: int, stream: Stream | None, credit: int) -> None:
        """DATA the hot path does not take: a connection error, or dropped with its
        ``credit`` still counted and given back, by the stream's state (:mod:`._streams`).

        Raises:
            ProtocolFailure: the peer may not send DATA on this stream (GOAWAY queued).
        """
        refusal = self._states.data_refusal(stream_id, stream)
        if refusal is not None:
            self._fail(*refusal)
        if stream is not None:
            stream.owed += credit
        self._owed_total += credit
        if self._owed_total >= self._ack_threshold:
            self._credit_all()

    def _feed_stream(self, stream_id: int, stream: Stream, data: bytes, out: list[Event]) -> None:
        budget = self._budget
        reader = stream.reader
        if budget is not None and not budget.take(len(data)):
            budget.give(reader.buffered)
            stream.reader = MessageReader(reader.limit)
            self._refuse(stream_id, stream, None, out)
            return
        before = reader.buffered
        try:
            messages = reader.feed(data)
        except FramingError as exc:
            if budget is not None:
                budget.give(before + len(data))  # none of it was handed out
            stream.reader = MessageReader(reader.limit)
            self._refuse(stream_id, stream, exc, out)
            return
        for message in messages:
            out.append(MessageReceived(stream_id, message))

    def _refuse(
        self, stream_id: int, stream: Stream, error: FramingError | None, out: list[Event]
    ) -> None:
        """A message the stream cannot take: too large, compressed, or over the budget
        (``error`` ``None``)."""
        raise NotImplementedError

    def release(self, size: int) -> None:
        """Give back ``size`` bytes of messages handled (each counts ``len + 5``)."""
        if self._budget is not None:
            self._budget.give(size)

    def _credit_all(self) -> None:
        for stream_id, stream in self._streams.items():
            if stream.owed:
                self._out += _frames.window_update(stream_id, stream.owed)
                stream.owed = 0
        if self._owed_total:
            self._out += _frames.window_update(0, self._owed_total)
            self._owed_total = 0

    def _on_window_update(self, stream_id: int, payload: bytes, out: list[Event]) -> None:
        if len(payload) != 4:
            self._fail(
                h2.errors.ErrorCodes.FRAME_SIZE_ERROR, "a WINDOW_UPDATE frame of the wrong size"
            )
        increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                self._fail(h2.errors.ErrorCodes.PROTOCOL_ERROR, "a zero connection WINDOW_UPDATE")
            if self._send_window + increment > MAX_WINDOW:
                self._fail(
                    h2.errors.ErrorCodes.FLOW_CONTROL_ERROR, "the connection window overflowed"
                )
            self._send_window += increment
            self._push_all()
            return
        stream = self._streams.get(stream_id)
        if stream is None:
            if self._states.idle(stream_id):
                self._fail(_PROTOCOL, f"WINDOW_UPDATE on idle stream {stream_id}")
            return  # a stream that is gone: nothing to send on it (§6.9 allows it)
        if increment == 0 or stream.window + increment > MAX_WINDOW:
            # A stream error (§6.9, §6.9.1), told to whoever serves or awaits the stream.
            code = _PROTOCOL if increment == 0 else h2.errors.ErrorCodes.FLOW_CONTROL_ERROR
            self.reset_stream(stream_id, code)
            out.append(StreamReset(stream_id, code, "a WINDOW_UPDATE the stream cannot take"))
            return
        stream.window += increment
        if stream.pending:
            self._push(stream_id, stream)

    def reset_stream(self, stream_id: int, error_code: int = h2.errors.ErrorCodes.CANCEL) -> None:
        """Abandon a stream (RST_STREAM). A no-op for a stream already gone."""
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return
        self._drop(stream)
        try:
            self._h2.reset_stream(stream_id, error_code)
        except h2.exceptions.ProtocolError:
            return  # already closed on the h2 side: nothing to tell the peer
        self._states.quieten(stream_id)  # its DATA in flight is still to come
        self._collect()

    def _drop(self, stream: Stream) -> None:
        """The stream is gone: its partial message's bytes go back to the budget."""
        if self._budget is not None and stream.reader.buffered:
            self._budget.give(stream.reader.buffered)

    def _on_final_data(self, event: h2.events.DataReceived, out: list[Event]) -> None:
        # A DATA frame that ends the stream went through h2 (its stream state must
        # know); h2 debited its own window for it, so credit it back through h2.
        if event.flow_controlled_length:
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        stream = self._streams.get(event.stream_id)
        if stream is not None and event.data and not stream.refused:
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
