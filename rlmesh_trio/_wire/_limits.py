"""What one server lets a client use: :class:`ServerLimits`, and the budgets that enforce it.

The defaults follow the mitigations of Go's and Rust's HTTP/2 servers
(CVE-2023-44487 rapid reset, CVE-2024-27316 CONTINUATION flood): a budget of
frames a client may send for no useful work, refilled at a steady rate; past
it the connection ends with GOAWAY ENHANCE_YOUR_CALM.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["ByteBudget", "RateBudget", "ServerLimits"]

MIB = 1024 * 1024

#: Defaults, each named so docs and tests can cite it.
MAX_CONCURRENT_STREAMS = 100
#: Above the 900 idle connections of the hostile-client matrix: idle and half-open ones
#: are ended by their deadlines, not by locking out a client with work to do.
MAX_CONNECTIONS = 4096
HANDSHAKE_TIMEOUT = 10.0
IDLE_TIMEOUT = 300.0
# Bytes held at once; a message near wire-v1's 256 MiB needs these raised.
CONNECTION_MESSAGE_BYTES = 128 * MIB
SERVER_MESSAGE_BYTES = 192 * MIB
MAX_HEADER_LIST_SIZE = 16 * 1024
RESET_BUDGET = 200
SERVER_RESET_BUDGET = 1000
SETTINGS_BUDGET = 100
PING_BUDGET = 100
EMPTY_DATA_BUDGET = 100
WINDOW_UPDATE_BUDGET = 10_000
REFILL_SECONDS = 10.0
LISTEN_BACKLOG = 1024


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ServerLimits.{attribute.name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"ServerLimits.{attribute.name} must be positive and finite, got {value!r}"
        )


def _whole(_instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"ServerLimits.{attribute.name} must be an int, got {value!r}")
    if value <= 0:
        raise ValueError(f"ServerLimits.{attribute.name} must be positive, got {value!r}")


def _field(default: float) -> Any:
    return attrs.field(default=default, validator=_whole if isinstance(default, int) else _positive)


@attrs.frozen(slots=True)
class ServerLimits:
    """What one env or model server lets its clients use; every field has a default.

    Attributes:
        max_concurrent_streams: streams open at once on one connection
            (advertised as SETTINGS_MAX_CONCURRENT_STREAMS).
        max_connections: connections open at once per server; one more is
            closed as soon as it is accepted.
        handshake_timeout: seconds a new connection has for TLS and the
            HTTP/2 preface.
        idle_timeout: seconds a connection may stay without an open stream
            before the server sends GOAWAY and closes it.
        connection_message_bytes: message bytes one connection may have in
            flight (received, not yet handled); a message past it ends its
            stream RESOURCE_EXHAUSTED.
        server_message_bytes: the same, over all connections of the server.
        max_header_list_size: bytes of one header block, decoded
            (SETTINGS_MAX_HEADER_LIST_SIZE) and encoded (CONTINUATION floods).
        reset_budget: RST_STREAM frames a connection may send in a burst.
            Past this or any other frame budget: GOAWAY ENHANCE_YOUR_CALM.
        server_reset_budget: RST_STREAM frames all connections of the server
            may send in a burst (a rapid reset reconnects for a fresh
            ``reset_budget``; this one it shares with its earlier connections).
        settings_budget: SETTINGS frames in a burst.
        ping_budget: PING frames in a burst.
        empty_data_budget: empty DATA frames (no END_STREAM) in a burst.
        window_update_budget: WINDOW_UPDATE frames in a burst; one that follows
            at least 1 KiB of DATA from the server is flow control at work and
            costs nothing.
        refill_seconds: each frame budget refills evenly over this time.
        listen_backlog: the listening socket's backlog.

    Raises:
        TypeError: a count that is not an int, a time that is not a number.
        ValueError: a field that is not positive (times must also be finite).
    """

    max_concurrent_streams: int = _field(MAX_CONCURRENT_STREAMS)
    max_connections: int = _field(MAX_CONNECTIONS)
    handshake_timeout: float = _field(HANDSHAKE_TIMEOUT)
    idle_timeout: float = _field(IDLE_TIMEOUT)
    connection_message_bytes: int = _field(CONNECTION_MESSAGE_BYTES)
    server_message_bytes: int = _field(SERVER_MESSAGE_BYTES)
    max_header_list_size: int = _field(MAX_HEADER_LIST_SIZE)
    reset_budget: int = _field(RESET_BUDGET)
    server_reset_budget: int = _field(SERVER_RESET_BUDGET)
    settings_budget: int = _field(SETTINGS_BUDGET)
    ping_budget: int = _field(PING_BUDGET)
    empty_data_budget: int = _field(EMPTY_DATA_BUDGET)
    window_update_budget: int = _field(WINDOW_UPDATE_BUDGET)
    refill_seconds: float = _field(REFILL_SECONDS)
    listen_backlog: int = _field(LISTEN_BACKLOG)


class RateBudget:
    """A token bucket: ``capacity`` frames at once, refilled at ``per_second``."""

    __slots__ = ("_capacity", "_last", "_per_second", "_tokens")

    def __init__(self, capacity: float, per_second: float, now: float) -> None:
        self._capacity = float(capacity)
        self._per_second = per_second
        self._tokens = float(capacity)
        self._last = now

    def spend(self, now: float) -> bool:
        """Take one token; ``False`` when the bucket is empty (the peer is over its rate)."""
        if self._tokens < 1.0:
            self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._per_second)
            self._last = now
            if self._tokens < 1.0:
                return False
        self._tokens -= 1.0
        return True


class ByteBudget:
    """Bytes held against a limit, optionally also against a ``parent`` (the server's)."""

    __slots__ = ("held", "limit", "parent")

    def __init__(self, limit: int, parent: ByteBudget | None = None) -> None:
        self.limit = limit
        self.parent = parent
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes if this budget and its parent have room."""
        if self.held + size > self.limit:
            return False
        parent = self.parent
        if parent is not None and not parent.take(size):
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Return ``size`` held bytes."""
        self.held -= size
        if self.parent is not None:
            self.parent.give(size)
