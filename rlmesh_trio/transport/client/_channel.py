"""A client's link to one endpoint: connect on demand, unary calls, error mapping."""

from __future__ import annotations

import contextlib
import ssl as _ssl
from collections.abc import Callable, Iterator

import trio

from ... import _wire as wire
from ..._errors import ConnectError, format_duration
from .._address import parse_address
from ._conn import Connection, ConnectionLost

__all__ = ["ClientConnection", "time_limit"]


@contextlib.contextmanager
def time_limit(seconds: float, error: Callable[[str], Exception]) -> Iterator[None]:
    """Bound the block by ``seconds``; then raise ``error("timed out after <seconds>")``.

    Raises:
        Exception: what ``error`` makes of the reason, once the time has run out.
    """
    try:
        with trio.fail_after(seconds):
            yield
    except trio.TooSlowError:
        raise error(f"timed out after {format_duration(seconds)}") from None


class _Unary:
    """One unary call's outcome, filled in by the connection's reader."""

    __slots__ = ("done", "lost", "message", "reply", "status")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: bytes | None = None
        self.status: wire.GrpcStatus | None = None
        self.message: str | None = None
        self.lost: str | None = None

    def on_headers(self, headers: list[tuple[str, str]]) -> None:
        pass

    def on_message(self, data: bytes) -> None:
        if self.reply is None:
            self.reply = data

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None:
        self.status, self.message = status, message
        self.done.set()

    def on_lost(self, detail: str) -> None:
        self.lost = detail
        self.done.set()

    def replies_owed(self) -> bool:
        return not self.done.is_set()


class ClientConnection:
    """One client's connection to one endpoint, used from Trio.

    Bounds each connect by ``connect_timeout`` and maps failures to
    :class:`ConnectError` naming the address. Keeps at most one live
    :class:`Connection`; one lost (or of an earlier Trio run) is replaced lazily.
    """

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = 10.0,
        token: str | None = None,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        if connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be positive, got {connect_timeout!r}")
        self.label = address
        self.address = parse_address(address)
        self.connect_timeout = connect_timeout
        # rlmesh compares the header to the token exactly (no ``Bearer `` prefix handling).
        self.metadata = {"authorization": token} if token else None
        self._ssl = ssl
        self._conn: Connection | None = None
        self._closed = False
        self._lock = trio.Lock()
        self.nursery: trio.Nursery | None = None  # set by the client's ``async with``

    async def connect(self) -> Connection:
        """The live connection, opening one within ``connect_timeout`` seconds if needed.

        Raises:
            ConnectError: unreachable, refused, timed out, TLS failed, or closed.
        Cancellation: abandons the connect; nothing is left half-open.
        """
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        if self._closed:
            raise ConnectError(self.label, "the client was closed")
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            if conn is not None:
                conn.close()
            self._conn = await self._open()
            return self._conn

    async def _open(self) -> Connection:
        try:
            with time_limit(self.connect_timeout, lambda why: ConnectError(self.label, why)):
                return await Connection.open(self.address, ssl=self._ssl, nursery=self.nursery)
        except _ssl.SSLError as exc:
            raise ConnectError(self.label, f"TLS handshake failed: {exc}") from exc
        except OSError as exc:
            raise ConnectError(self.label, _describe_os_error(exc)) from exc
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            if isinstance(cause, _ssl.SSLError):
                raise ConnectError(self.label, f"TLS handshake failed: {cause}") from exc
            raise ConnectError(self.label, "connection lost during the TLS handshake") from exc

    async def unary(self, path: str, payload: bytes, *, timeout: float) -> bytes:
        """One unary RPC (connecting first if needed).

        Raises:
            ConnectError: transport failures (its ``__cause__`` is a
                :class:`ConnectionLost` when the connection dropped mid-call).
            GrpcError: a non-OK gRPC status, for the caller to map.
        Cancellation: resets the call's stream.
        """
        conn = await self.connect()
        wire.check_size(payload, path)
        call = _Unary()
        try:
            stream_id = conn.open_stream(path, call, metadata=self.metadata, timeout=timeout)
            conn.send(stream_id, payload, end=True)
        except ConnectionLost as exc:
            raise ConnectError(self.label, exc.detail) from exc
        try:
            with time_limit(timeout, lambda why: ConnectError(self.label, f"{path} {why}")):
                await conn.flush()
                conn.wake_reader()
                await call.done.wait()
        except BaseException:
            conn.reset_stream(stream_id)
            raise
        if call.lost is not None:
            raise ConnectError(self.label, call.lost) from ConnectionLost(call.lost)
        if call.status is None:
            raise ConnectError(self.label, "the stream ended without a gRPC status")
        if call.status is not wire.GrpcStatus.OK:
            raise wire.GrpcError(call.status, call.message)
        if call.reply is None:
            raise ConnectError(self.label, f"{path} returned no message")
        return call.reply

    def close(self) -> None:
        """Drop the connection. Idempotent, never blocks (safe in a cancelled scope)."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _describe_os_error(exc: BaseException) -> str:
    """A short reason for a failed connect (trio wraps per-address failures in a group)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        inner = [e for e in cause.exceptions if isinstance(e, OSError)]
        if inner:
            exc = inner[0]
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, FileNotFoundError):
        return "no such unix socket"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
