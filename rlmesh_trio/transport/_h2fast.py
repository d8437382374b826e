"""A short path for plain HTTP/2 DATA frames on a grpclib client connection.

h2 handles every frame generically: a frame object, two state machines, a
logger call or two and per-frame event objects -- some 25 µs per DATA frame
each way on the reference machine, most of the HTTP/2 cost of a route step.
On a connection that is up and a stream that is open, a DATA frame without
flags needs none of that beyond flow-control accounting, so:

* :func:`send_data` writes one DATA frame (header + payload) straight to the
  transport, debiting h2's connection and stream send windows exactly as
  ``H2Connection.send_data`` would;
* :func:`install_fast_receive` wraps a grpclib protocol's ``data_received``:
  a chunk made only of whole, flag-less DATA frames on open streams is
  accounted in h2's receive windows and handed to the stream's buffer, as
  grpclib's own ``process_data_received`` does; any other chunk (headers,
  trailers, settings, pings, window updates, a frame split across reads,
  anything unexpected) goes through h2 untouched.

Both reach into h2 and grpclib internals, check every precondition before
changing any state, and decline (return ``False`` / use the normal path)
when something is not as expected -- correctness never depends on them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from h2.connection import ConnectionState
from h2.stream import StreamState

__all__ = ["install_fast_receive", "send_data"]

log = logging.getLogger(__name__)

_OPEN = (ConnectionState.CLIENT_OPEN, ConnectionState.SERVER_OPEN)
_RECEIVING = (StreamState.OPEN, StreamState.HALF_CLOSED_LOCAL)
_DATA_HEADER = 9


def send_data(stream: Any, frame: bytes) -> bool:
    """Write ``frame`` as one DATA frame on grpclib protocol stream ``stream``, if safe now.

    Safe when the connection is open and writable, the stream is open, h2
    has nothing of its own waiting to be sent (so frame order is kept), and
    the frame fits the send windows and the peer's maximum frame size.
    Returns ``False`` without changing anything otherwise.
    """
    try:
        h2 = stream._h2_connection
        stream_id = stream.id
        h2_stream = h2.streams.get(stream_id)
        size = len(frame)
        if (
            h2_stream is None
            or h2.state_machine.state not in _OPEN
            or h2_stream.state_machine.state is not StreamState.OPEN
            or h2._data_to_send
            or not stream.connection.write_ready.is_set()
            or size > h2.max_outbound_frame_size
            or size > h2.outbound_flow_control_window
            or size > h2_stream.outbound_flow_control_window
        ):
            return False
        transport = stream._transport
    except Exception:
        log.debug("fast DATA send declined", exc_info=True)
        return False
    h2_stream.outbound_flow_control_window -= size
    h2.outbound_flow_control_window -= size
    stream.data_sent += size
    stream.connection.data_sent += size
    stream.connection.data_send_process()
    header = size.to_bytes(3, "big") + b"\x00\x00" + stream_id.to_bytes(4, "big")
    # Committed now (the windows are debited): a failed write means the connection is
    # gone, which its reader reports; never report False and get the frame sent twice.
    with contextlib.suppress(Exception):
        transport.write(header + frame)
    return True


class _FastReceive:
    """``data_received`` for one grpclib ``H2Protocol``: DATA-only chunks skip h2's frame walk."""

    __slots__ = ("_connection", "_h2", "_original", "_processor", "fast", "slow")

    def __init__(self, protocol: Any) -> None:
        #: Reads handled here / passed to h2 (for tests and diagnostics).
        self.fast = 0
        self.slow = 0
        self._original = protocol.data_received
        self._connection = protocol.connection
        self._h2 = protocol.connection._connection
        self._processor = protocol.processor

    def __call__(self, data: bytes) -> None:
        try:
            frames = self._plan(data)
        except Exception:
            log.debug("fast DATA receive declined", exc_info=True)
            frames = None
        if frames is None:
            self.slow += 1
            self._original(data)
            return
        self.fast += 1
        connection = self._connection
        conn_window = self._h2._inbound_flow_control_window_manager
        size_total = 0
        for stream, h2_stream, start, size in frames:
            conn_window.window_consumed(size)
            h2_stream._inbound_window_manager.window_consumed(size)
            stream.buffer.add(data[start : start + size], size)
            stream.data_received += size
            size_total += size
        connection.data_received += size_total
        connection.last_data_received = time.monotonic()
        connection.flush()

    def _plan(self, data: bytes) -> list[tuple[Any, Any, int, int]] | None:
        """The DATA frames in ``data`` with their streams, or ``None`` to use h2."""
        h2 = self._h2
        incoming = h2.incoming_buffer
        if (
            h2.state_machine.state not in _OPEN
            or incoming._data
            or incoming._headers_buffer
            or incoming._preamble_len
        ):
            return None
        end = len(data)
        if end < _DATA_HEADER:
            return None
        max_size = h2.max_inbound_frame_size
        streams = self._processor.streams
        h2_streams = h2.streams
        room = h2._inbound_flow_control_window_manager.current_window_size
        frames: list[tuple[Any, Any, int, int]] = []
        budget: dict[int, int] = {}
        pos = 0
        while pos < end:
            if end - pos < _DATA_HEADER:
                return None
            size = int.from_bytes(data[pos : pos + 3], "big")
            if data[pos + 3] or data[pos + 4]:  # not DATA, or flags (END_STREAM, PADDED)
                return None
            stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
            start = pos + _DATA_HEADER
            if size > max_size or start + size > end:
                return None
            stream = streams.get(stream_id)
            h2_stream = h2_streams.get(stream_id)
            if (
                stream is None
                or h2_stream is None
                or h2_stream.state_machine.state not in _RECEIVING
                or not h2_stream.state_machine.headers_received
                or h2_stream._expected_content_length is not None
            ):
                return None
            room -= size
            left = budget.get(stream_id)
            if left is None:
                left = h2_stream._inbound_window_manager.current_window_size
            budget[stream_id] = left - size
            if room < 0 or left - size < 0:
                return None  # a flow-control violation: let h2 raise it properly
            frames.append((stream, h2_stream, start, size))
            pos = start + size
        return frames


def install_fast_receive(protocol: Any) -> bool:
    """Route ``protocol``'s DATA-only reads around h2's frame walk. ``False`` if not possible."""
    try:
        if isinstance(protocol.data_received, _FastReceive):
            return True
        receiver = _FastReceive(protocol)
        h2 = receiver._h2
        incoming = h2.incoming_buffer
        # Touch every internal the fast path relies on, so a different h2 fails here.
        _ = (
            incoming._data,
            incoming._headers_buffer,
            incoming._preamble_len,
            h2._inbound_flow_control_window_manager.current_window_size,
            h2.max_inbound_frame_size,
            receiver._processor.streams,
        )
    except Exception:
        log.debug("fast DATA receive not installed", exc_info=True)
        return False
    protocol.data_received = receiver
    return True
