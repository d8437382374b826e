"""Writing one connection's queued bytes: what the client's and the server's connections share.

A write the stream takes whole without waiting (``ByteStream.send_now``: a
plain socket's descriptor) needs no await: ``send_all`` always yields once, a
trip through Trio's scheduler per reply that a small write does not need. What
it does not take (a full buffer, or a TLS stream) goes through ``send_all``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from ._stream import ByteStream

__all__ = ["CLOSED_ERRORS", "Queued", "SocketWriter"]

#: What a Trio stream raises for a connection that is gone.
CLOSED_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class Queued(Protocol):
    """The I/O-free core whose bytes are written (``ClientCore`` or ``ServerCore``)."""

    @property
    def wants_write(self) -> bool: ...

    def data_to_send(self) -> bytes: ...


class Owner(Protocol):
    """The connection written for: ``lost`` is set once it is gone."""

    lost: str | None


class SocketWriter:
    """The write side of one connection: the core's bytes to ``stream``, one writer
    at a time.

    ``lose(detail)`` is called once a write finds the connection gone;
    ``wake()`` asks the connection's writer task to flush what a cancelled or
    busy flush left queued. ``checkpoints`` makes :meth:`flush` a cancellation
    point at every write (the client's; a server's trailers go out even while
    it is being cancelled, as long as the socket takes them at once).
    """

    __slots__ = (
        "_checkpoints",
        "_core",
        "_lose",
        "_owner",
        "_send_now",
        "_stream",
        "_wake",
        "unsent",
        "writing",
    )

    def __init__(
        self,
        core: Queued,
        stream: ByteStream,
        owner: Owner,
        *,
        lose: Callable[[str], None],
        wake: Callable[[], None],
        checkpoints: bool,
    ) -> None:
        self._core = core
        self._stream = stream
        self._send_now = stream.send_now
        self._owner = owner
        self._lose = lose
        self._wake = wake
        self._checkpoints = checkpoints
        #: Bytes taken from the core that the socket has not taken yet.
        self.unsent = b""
        #: Whether a :meth:`flush` is under way (the others leave the bytes to it).
        self.writing = False

    @property
    def pending(self) -> bool:
        """Whether bytes wait to be written (taken from the core or still in it)."""
        return bool(self.unsent) or self._core.wants_write

    def write_now(self) -> bool:
        """Write the queued bytes straight to the socket if it takes them whole: no await.

        Returns ``False`` when bytes are left for :meth:`flush` (a TLS stream, or
        a full socket buffer; a flush under way writes them itself). Never raises
        for a broken connection (``lose`` is called).
        """
        if self.writing or self._owner.lost is not None:
            return True
        # Once per request: the core's bytes taken as they are (b"" when none), no
        # detour through ``pending``.
        data = self._core.data_to_send()
        if self.unsent:
            data = self.unsent + data
        elif not data:
            return True
        self.unsent = self._write_direct(data)
        return not self.unsent

    def write_last(self) -> None:
        """Best-effort, without waiting: the core's last words (a GOAWAY) on a plain socket."""
        data = self.unsent + self._core.data_to_send()
        self.unsent = b""
        if data:
            self._write_direct(data)

    def _write_direct(self, data: bytes) -> bytes:
        """What of ``data`` the socket did not take at once (``b""`` after a loss)."""
        try:
            sent = self._send_now(data)
        except BlockingIOError:
            return data
        except CLOSED_ERRORS:
            self._lose("connection closed")
            return b""
        return data[sent:]

    async def flush(self) -> None:
        """Write every queued byte (unless another task is already writing them).

        Never raises for a broken connection: ``lose`` is called. Cancellation:
        bytes not yet handed to the socket stay queued (``wake`` is called); a
        write cancelled halfway loses the connection.
        """
        if self.writing or self._owner.lost is not None:
            return
        core = self._core
        owner = self._owner
        self.writing = True
        try:
            while self.unsent or core.wants_write:
                if self._checkpoints:
                    await trio.lowlevel.checkpoint_if_cancelled()
                if owner.lost is not None:
                    return  # closed while we were away: the descriptor may be gone
                data, self.unsent = self.unsent + core.data_to_send(), b""
                data = self._write_direct(data)
                if not data:
                    continue
                try:
                    await self._stream.send_all(data)
                except CLOSED_ERRORS:
                    self._lose("connection closed")
                    return
                except trio.Cancelled:
                    self._lose("connection closed")  # part of a frame may be on the wire
                    raise
        finally:
            self.writing = False
            if owner.lost is None and (self.unsent or core.wants_write):
                self._wake()
