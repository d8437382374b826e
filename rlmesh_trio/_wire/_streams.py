"""Streams as the wire core knows them, and what the peer may send on each (RFC 9113 §5.1).

DATA (without END_STREAM) and WINDOW_UPDATE skip h2's state machine (the core
handles them itself, :mod:`._h2base`), so the rules of RFC 9113 for them are
kept here, by the stream's state as the connection knows it: in its stream
table (:class:`Stream`), or gone from it (:class:`StreamStates`). Our reading:

* DATA on stream 0 (§6.1), or on an idle stream (§5.1 idle: never opened, an
  even id, as neither end opens those here, or an odd one above the highest
  opened): connection error PROTOCOL_ERROR. So is a WINDOW_UPDATE (§5.1 idle)
  or a RST_STREAM (§6.4; h2 itself lets that one pass) on an idle stream.
* DATA on a stream the peer ended (END_STREAM sent: half-closed (remote), or
  closed after it): connection error STREAM_CLOSED. §5.1 asks a stream error
  in half-closed (remote) and allows the connection error once closed; the
  frame cannot have crossed one of ours in flight (the peer ended the stream
  itself, before it), so it is the connection error in both, which §5.4.1
  allows for any stream error. The same for DATA on a stream the peer reset,
  on one closed without use (a lower id skipped, §5.1.1), or on one we reset
  longer ago than we remember.
* DATA on a stream we reset (RST_STREAM sent) or, on the server, one we ended
  while the client was still sending (half-closed (local)): dropped, still
  counted toward the connection window and credited back (§5.1 closed, §6.9),
  so a peer whose frames crossed ours does not stall. The last
  ``QUIET_STREAMS`` such streams are remembered (§5.1 lets the period be limited).
* DATA on the client's stream before its response's HEADERS: connection error
  PROTOCOL_ERROR (a malformed response, §8.1.1; h2 does the same with a DATA
  frame it sees).
* WINDOW_UPDATE on a half-closed or closed stream: ignored (§6.9). On an open
  stream, an increment of 0 is a stream error PROTOCOL_ERROR (§6.9), one past
  2^31-1 a stream error FLOW_CONTROL_ERROR (§6.9.1).
* DATA or WINDOW_UPDATE inside a header block: given to h2, which ends the
  connection with PROTOCOL_ERROR (§6.10).

A DATA frame with END_STREAM goes through h2, which keeps the same table except
that it answers one on a half-closed (remote) or closed stream with a stream
error (RST_STREAM STREAM_CLOSED), crediting the connection window too.
"""

from __future__ import annotations

import h2.errors

from . import _frames
from ._grpc import MessageReader

__all__ = ["QUIET_STREAMS", "Stream", "StreamStates"]

#: How many streams gone from the table whose DATA may still come are remembered.
QUIET_STREAMS = 1024
_PROTOCOL = h2.errors.ErrorCodes.PROTOCOL_ERROR
_STREAM_CLOSED = h2.errors.ErrorCodes.STREAM_CLOSED


class Stream:
    """One stream's flow-control state and the messages being cut out of it."""

    __slots__ = (
        "head",
        "headers",
        "owed",
        "pending",
        "reader",
        "refused",
        "remote_open",
        "taking",
        "trailers",
        "want_end",
        "window",
    )

    def __init__(self, stream_id: int, window: int, limit: int) -> None:
        # What follows the length in a DATA frame of one whole message: type, flags,
        # stream id, then the gRPC prefix's compressed flag.
        self.head = _frames.data_frame_header(stream_id, 0)[3:] + b"\x00"
        self.reader = MessageReader(limit)
        self.window = window  # what the peer lets us send on this stream
        self.owed = 0  # received bytes not yet credited back to the peer
        self.pending = bytearray()  # framed bytes waiting for flow-control window
        self.want_end = False  # end the stream once ``pending`` is out
        self.refused = False  # input is dropped (a message it could not take)
        self.remote_open = True  # the peer may still send on it
        # DATA on it takes the hot path: the peer may send and we take what it sends
        # (not refused; on the client, once the response's headers are in).
        self.taking = True
        self.headers: list[tuple[str, str]] | None = None
        self.trailers: list[tuple[str, str]] | None = None


class StreamStates:
    """What the stream table does not hold: which streams were ever opened, and which
    ones gone from it may still see the peer's DATA ("quiet": dropped, not an error)."""

    __slots__ = ("opened_high", "quiet")

    def __init__(self) -> None:
        # The highest stream id opened (the client's odd ids: neither end opens even
        # ones here); above it, or even, a stream is idle.
        self.opened_high = 0
        self.quiet: dict[int, None] = {}

    def idle(self, stream_id: int) -> bool:
        """Whether the stream was never opened (stream 0 included: never one to open)."""
        return not stream_id & 1 or stream_id > self.opened_high

    def quieten(self, stream_id: int) -> None:
        """The stream left the table while the peer may still be sending on it."""
        quiet = self.quiet
        quiet[stream_id] = None
        if len(quiet) > QUIET_STREAMS:
            del quiet[next(iter(quiet))]

    def forget(self, stream_id: int) -> None:
        """The peer ended or reset the stream: no more of its DATA is expected."""
        self.quiet.pop(stream_id, None)

    def data_refusal(self, stream_id: int, stream: Stream | None) -> tuple[int, str] | None:
        """Why DATA the hot path did not take (the stream gone from the table, or not
        ``taking``) is a connection error: its code and text; ``None``: it is dropped."""
        if stream is None:
            if stream_id in self.quiet:
                return None
            if self.idle(stream_id):
                return _PROTOCOL, f"DATA on idle stream {stream_id}"
            return _STREAM_CLOSED, f"DATA on closed stream {stream_id}"
        if not stream.remote_open:
            return _STREAM_CLOSED, f"DATA on stream {stream_id} after its END_STREAM"
        if not stream.refused:
            return _PROTOCOL, f"DATA on stream {stream_id} before its response headers"
        return None  # the rest of a message refused
