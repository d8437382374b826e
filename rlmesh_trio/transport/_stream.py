"""The byte-stream seam: what the client's and the server's connections read and write.

Both halves of the transport talk to one small interface, :class:`ByteStream`,
never to sockets or TLS objects themselves (the way httpcore's protocol code
talks to its network-stream backend). Its calls have ``os.read``/``os.write``
semantics, so the fast path costs no extra coroutine:

* :class:`SocketByteStream` -- a plain TCP or unix socket: ``receive_now`` and
  ``send_now`` are ``os.read``/``os.write`` on the descriptor, bound once;
  ``wait_receivable`` is Trio's ``wait_readable`` on it (a partial, not a
  coroutine of ours), which consumes nothing;
* :class:`BufferedByteStream` -- any ``trio.abc.Stream`` (an ``SSLStream``, or
  ``trio.testing``'s in-memory pairs in tests): ``wait_receivable`` receives
  into a buffer that ``receive_now`` hands over; nothing is ever sent without
  waiting, so writes go through ``send_all``.

Every call may raise ``OSError`` or Trio's ``BrokenResourceError`` /
``ClosedResourceError`` once the connection is gone (see
:data:`~._writing.CLOSED_ERRORS`).
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

__all__ = ["RECEIVE_SIZE", "BufferedByteStream", "ByteStream", "SocketByteStream", "byte_stream"]

#: The most one read takes, by default (a server's reads take less: see its connection).
RECEIVE_SIZE = 256 * 1024
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class ByteStream(Protocol):
    """One connection's bytes, both ways (see the module doc)."""

    #: What has arrived (at most the stream's receive size); ``b""`` once the peer closed.
    #: Raises ``BlockingIOError`` when nothing has: wait with :attr:`wait_receivable`.
    receive_now: Callable[[], bytes]
    #: Returns once :attr:`receive_now` has an answer (bytes, or the peer's close).
    #: Cancellation: safe at any point; nothing received is lost.
    wait_receivable: Callable[[], Awaitable[None]]
    #: Writes a prefix of ``data`` without waiting and says how many bytes it took.
    #: Raises ``BlockingIOError`` when it can take none now: use :meth:`send_all`.
    send_now: Callable[[bytes], int]
    #: Whether :meth:`acknowledge_now` means something here (TCP).
    acknowledges: bool

    async def send_all(self, data: bytes) -> None:
        """Write every byte of ``data``, waiting for room.

        Cancellation: part of ``data`` may have been written; the connection is
        then unusable (its owner treats it as lost).
        """
        ...

    async def handshake(self) -> None:
        """Finish any handshake of the layer below (TLS); nothing for a plain socket.

        Cancellation: the stream is unusable afterwards.
        """
        ...

    async def send_eof(self) -> None:
        """Send our end of the byte stream (a TCP FIN) where the layer below can half
        close; a no-op where it cannot (TLS). Cancellation: nothing more is sent."""
        ...

    def acknowledge_now(self) -> None:
        """Ask the kernel to acknowledge received bytes at once (TCP_QUICKACK), where
        that means something; a no-op elsewhere."""
        ...

    async def aclose(self) -> None:
        """Close at once (forcefully: nothing more is sent). Never raises."""
        ...


class SocketByteStream:
    """A plain TCP or unix socket: the descriptor is read and written directly."""

    __slots__ = (
        "_quickack",
        "_socket",
        "acknowledges",
        "receive_now",
        "send_now",
        "wait_receivable",
    )

    def __init__(self, socket_stream: trio.SocketStream, receive_size: int = RECEIVE_SIZE) -> None:
        self._socket = socket_stream
        sock = socket_stream.socket
        fd = sock.fileno()
        self.receive_now: Callable[[], bytes] = functools.partial(os.read, fd, receive_size)
        self.send_now: Callable[[bytes], int] = functools.partial(os.write, fd)
        self.wait_receivable: Callable[[], Awaitable[None]] = functools.partial(
            trio.lowlevel.wait_readable, fd
        )
        tcp = sock.family in (socket.AF_INET, socket.AF_INET6)
        self._quickack = _TCP_QUICKACK if tcp else None
        self.acknowledges = self._quickack is not None

    async def send_all(self, data: bytes) -> None:
        await self._socket.send_all(data)

    async def handshake(self) -> None:
        return None

    async def send_eof(self) -> None:
        await self._socket.send_eof()

    def acknowledge_now(self) -> None:
        if self._quickack is None:
            return
        try:
            self._socket.setsockopt(socket.IPPROTO_TCP, self._quickack, 1)
        except OSError:
            self._quickack = None
            self.acknowledges = False

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._socket)


class BufferedByteStream:
    """Any ``trio.abc.Stream`` (TLS, or an in-memory pair): reads go through a buffer."""

    __slots__ = (
        "_buffer",
        "_closed",
        "_size",
        "_stream",
        "acknowledges",
        "receive_now",
        "send_now",
        "wait_receivable",
    )

    def __init__(self, stream: trio.abc.Stream, receive_size: int = RECEIVE_SIZE) -> None:
        self._stream = stream
        self._size = receive_size
        self._buffer = b""
        self._closed = False  # the peer closed: receive_now answers b"" from now on
        # Attributes, as on SocketByteStream (where they are bound os calls).
        self.receive_now: Callable[[], bytes] = self._take
        self.wait_receivable: Callable[[], Awaitable[None]] = self._fill
        self.send_now: Callable[[bytes], int] = self._refuse_send
        self.acknowledges = False

    def _take(self) -> bytes:
        data = self._buffer
        if data:
            self._buffer = b""
            return data
        if self._closed:
            return b""
        raise BlockingIOError

    async def _fill(self) -> None:
        if self._buffer or self._closed:
            await trio.lowlevel.checkpoint()
            return
        data = bytes(await self._stream.receive_some(self._size))
        if data:
            self._buffer = data
        else:
            self._closed = True

    def _refuse_send(self, data: bytes) -> int:
        raise BlockingIOError  # a Trio stream sends only by waiting

    async def send_all(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def handshake(self) -> None:
        if isinstance(self._stream, trio.SSLStream):
            await self._stream.do_handshake()

    async def send_eof(self) -> None:
        if isinstance(self._stream, trio.abc.HalfCloseableStream):
            await self._stream.send_eof()

    def acknowledge_now(self) -> None:
        return None

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self._stream)


def byte_stream(stream: trio.abc.Stream, receive_size: int = RECEIVE_SIZE) -> ByteStream:
    """The seam for ``stream``: the direct one for a plain socket, else a buffered one."""
    if isinstance(stream, trio.SocketStream):
        return SocketByteStream(stream, receive_size)
    return BufferedByteStream(stream, receive_size)
