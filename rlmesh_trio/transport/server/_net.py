"""What both servers share on the network: the listening socket, accepting within the
limits, the message codec, the token check's inputs, unary methods.

Trio sockets and the I/O-free server core (:mod:`rlmesh_trio._wire`) only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl as ssl_module
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import betterproto2
import trio

from ... import _wire as wire
from ..._protocol import MAX_MESSAGE_BYTES
from ..._wire import _frames
from .._address import Address
from .._stream import BufferedByteStream, ByteStream, SocketByteStream
from ._call import Handler, ServerCall
from ._conn import RECEIVE_SIZE, ServerConnection, Service

__all__ = ["Listener", "Service", "SizeLimitedCodec", "decode_request", "open_listener", "unary"]

log = logging.getLogger("rlmesh_trio.transport.server")


def _too_big(size: int) -> wire.GrpcError:
    return wire.GrpcError(
        wire.GrpcStatus.RESOURCE_EXHAUSTED,
        f"message of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
    )


class SizeLimitedCodec:
    """Messages to and from bytes: the hand codecs of :mod:`rlmesh_trio._wire`'s registry,
    betterproto2 otherwise, wire-v1's 256 MiB both ways. An undecodable message is
    INVALID_ARGUMENT: without a request id no typed reply is possible."""

    def encode(self, message: Any, message_type: Any) -> bytes:
        """Raises: GrpcError: RESOURCE_EXHAUSTED over the size limit."""
        hand = wire.HAND_ENCODERS.get(message_type)
        data = bytes(message) if hand is None else hand(message)
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        return data

    @staticmethod
    def fits(data: bytes) -> bool:
        """Whether a received message is within the size limit (:meth:`decode` refuses
        it otherwise): for a server that reads a request from its parts."""
        return len(data) <= MAX_MESSAGE_BYTES

    @staticmethod
    def checked(data: bytes) -> bytes:
        """An encoded message, refused over the size limit as :meth:`encode` does.

        Raises:
            GrpcError: RESOURCE_EXHAUSTED over the size limit.
        """
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        return data

    def decode(self, data: bytes, message_type: Any) -> Any:
        """Raises: GrpcError: RESOURCE_EXHAUSTED over the size limit, INVALID_ARGUMENT
        for bytes that do not parse."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        try:
            hand = wire.HAND_DECODERS.get(message_type)
            return wire.parse_message(message_type, data) if hand is None else hand(data)
        except Exception as exc:
            problem = str(exc)
        # Raised outside the handler, unchained: the parse's traceback holds frames that
        # hold ``data`` (up to 256 MiB), and a chained one keeps them until the cyclic GC.
        name = getattr(message_type, "__name__", "message")
        raise wire.GrpcError(
            wire.GrpcStatus.INVALID_ARGUMENT, f"could not decode a {name}: {problem}"
        )


CODEC = SizeLimitedCodec()

#: Requests larger than this are decoded on a worker thread: a pure-Python parse of
#: many MiB must not hold the server's run (other connections) for its whole length.
THREAD_DECODE_BYTES = 1024 * 1024


async def decode_request(data: bytes, message_type: Any) -> Any:
    """:meth:`SizeLimitedCodec.decode`, on a worker thread for a large message.

    Cancellation: a cancelled wait abandons the decode (it finishes on its thread).

    Raises:
        GrpcError: as :meth:`SizeLimitedCodec.decode`.
    """
    if len(data) < THREAD_DECODE_BYTES:
        return CODEC.decode(data, message_type)
    decoded, refusal = await trio.to_thread.run_sync(
        _decode_or_refusal, data, message_type, abandon_on_cancel=True
    )
    if refusal is not None:
        # A fresh exception, held by no local: one this frame held would be a cycle.
        raise wire.GrpcError(*refusal)
    return decoded


def _decode_or_refusal(
    data: bytes, message_type: Any
) -> tuple[Any, tuple[wire.GrpcStatus, str | None] | None]:
    # Nothing raised across the thread: trio keeps a raising function's outcome in a
    # frame that its traceback holds (a cycle), and the traceback's frames hold ``data``
    # (up to 256 MiB) until the cyclic GC runs, long after the call is over.
    try:
        return CODEC.decode(data, message_type), None
    except wire.GrpcError as exc:
        return None, (exc.status, exc.message)


def unary(answer: Callable[[Any], Awaitable[betterproto2.Message]], request_type: type) -> Handler:
    """A handler for a unary method: one request (decoded) to ``answer``, its reply back."""

    async def handle(call: ServerCall) -> None:
        data = await call.recv()
        if data is None:
            raise wire.GrpcError(wire.GrpcStatus.INTERNAL, "no request message")
        reply = await answer(await decode_request(data, request_type))
        # Queued only: the call's end writes it with the headers and trailers, in one write.
        call.send_now(CODEC.encode(reply, type(reply)))

    return handle


def _bound_socket(bind: Address, backlog: int) -> socket.socket:
    if bind.path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
        target: Any = bind.path
    else:
        family = socket.AF_INET6 if ":" in (bind.host or "") else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        target = (bind.host, bind.port)
    try:
        if bind.path is None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            # A socket file left by an earlier server is replaced; any other file
            # there is left alone and binding fails.
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.stat(bind.path).st_mode):
                    os.unlink(bind.path)
        sock.bind(target)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Listener:
    """A bound listening socket (:attr:`sock`) and its accept loop; :attr:`address` is bound."""

    def __init__(
        self, sock: socket.socket, bind: Address, ssl: ssl_module.SSLContext | None
    ) -> None:
        self.sock = sock
        self._trio_sock = trio.socket.from_stdlib_socket(sock)
        self._ssl = ssl
        self._refusing = 0  # connections past max_connections being told why
        self._path = bind.path
        if bind.path is not None:
            self.address = f"unix://{bind.path}"
        else:
            host, port = sock.getsockname()[:2]
            self.address = str(Address(host=host, port=port))

    async def serve(self, service: Service) -> None:
        """Accept connections until cancelled; one past ``max_connections`` is closed
        at once. Cancellation: stops accepting (connections are the service's)."""
        listener = trio.SocketListener(self._trio_sock)
        limit = service.limits.max_connections
        while True:
            try:
                tcp = await listener.accept()
            except OSError as exc:  # EMFILE and kin: back off briefly, keep serving
                log.warning("accept failed: %s", exc)
                await trio.sleep(0.05)
                continue
            if len(service.connections) >= limit:
                if self._ssl is None and self._refusing < MAX_REFUSING:
                    self._refusing += 1
                    service.nursery.start_soon(self._refuse, tcp, service.preface, limit)
                else:  # TLS (no handshake for it), or a flood of them: closed at once
                    await trio.aclose_forcefully(tcp)
                continue
            stream: ByteStream = SocketByteStream(tcp, RECEIVE_SIZE)
            if self._ssl is not None:
                tls = trio.SSLStream(tcp, self._ssl, server_side=True)
                stream = BufferedByteStream(tls, RECEIVE_SIZE)
            service.nursery.start_soon(_run_connection, service, stream)

    async def _refuse(self, tcp: trio.SocketStream, preface: bytes, limit: int) -> None:
        """Turn away a connection past ``max_connections`` with a reason: our SETTINGS
        and a GOAWAY saying why, a FIN, then what its client still sends (its preface,
        its first request) read and dropped until it closes, for at most
        :data:`REFUSE_LINGER` seconds: closing with its bytes unread would send a TCP
        reset, which throws away the GOAWAY before the client reads it."""
        reason = TOO_MANY.format(limit=limit).encode()
        try:
            with trio.move_on_after(REFUSE_LINGER):
                await tcp.send_all(preface + _frames.goaway(_REFUSED_CODE, reason))
                await tcp.send_eof()
                drained = 0
                while drained < 1 << 20 and (data := await tcp.receive_some(65536)):
                    drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self._refusing -= 1
            await trio.aclose_forcefully(tcp)

    def remove_file(self) -> None:
        """Remove a unix socket's file (when stopping)."""
        if self._path:
            with contextlib.suppress(OSError):
                os.unlink(self._path)


#: The GOAWAY debug data a connection past ``max_connections`` gets (what its client shows).
TOO_MANY = "too many connections: the server allows {limit} at once (max_connections)"
#: ENHANCE_YOUR_CALM: the client's connections load the server past what it allows.
_REFUSED_CODE = 0xB
#: Connections past ``max_connections`` told why at once; more are closed without a word.
MAX_REFUSING = 64
#: How long a refused connection's client has to read why (its bytes meanwhile dropped).
REFUSE_LINGER = 1.0


class _Unspoken:
    """An accepted connection whose client has sent nothing yet. It counts against
    ``max_connections`` and is closed by a stopping server, but holds no protocol
    state: its :class:`ServerConnection` (an h2 state machine, about 15 KiB) is
    built when the client's first bytes arrive."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()

    def stop_calls(self) -> None:
        """No calls yet."""

    def close(self) -> None:
        self.scope.cancel()


def _write_preface(stream: ByteStream, preface: bytes) -> bytes:
    """Write our preface on a fresh socket now (one write: it fits an empty send buffer);
    what was written (``b""``: nothing, and the connection's core writes all of it; a
    TLS stream writes nothing before its handshake)."""
    try:
        return preface[: stream.send_now(preface)]
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


async def _run_connection(service: Service, stream: ByteStream) -> None:
    """Serve one accepted connection; a plain socket's client must send its first bytes
    within the handshake deadline, or it is closed with nothing built for it."""
    deadline = trio.current_time() + service.limits.handshake_timeout
    sent = _write_preface(stream, service.preface)
    if sent:
        quiet = _Unspoken()
        service.connections.add(quiet)
        try:
            with quiet.scope, trio.move_on_at(deadline) as waited:
                await stream.wait_receivable()
        finally:
            service.connections.discard(quiet)
        if quiet.scope.cancelled_caught or waited.cancelled_caught:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return
    conn = ServerConnection(service, stream, handshake_deadline=deadline, preface_sent=sent)
    service.connections.add(conn)
    try:
        await conn.run()
    finally:
        service.connections.discard(conn)


def open_listener(
    bind: Address, limits: wire.ServerLimits, ssl: ssl_module.SSLContext | None
) -> Listener:
    """Bind ``bind`` with the limits' backlog (TLS contexts get ALPN ``h2``).

    Raises:
        OSError: the address cannot be bound (the port is taken, say).
    """
    if ssl is not None:
        ssl.set_alpn_protocols(["h2"])
    sock = _bound_socket(bind, int(limits.listen_backlog))
    return Listener(sock, bind, ssl)
