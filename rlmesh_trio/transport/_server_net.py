"""The grpclib side both servers share: listening sockets, the codec, the token, handlers.

Public API only: grpclib's ``Server`` started on a listening socket of ours, a
codec subclass, a ``RecvRequest`` listener for the bearer token, plain ``socket`` calls.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import socket
import ssl as ssl_module
import stat
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import grpclib.config
import grpclib.server
from grpclib.const import Status
from grpclib.encoding.proto import ProtoCodec
from grpclib.events import RecvRequest, listen
from grpclib.exceptions import GRPCError
from grpclib.health.service import Health

from .. import wire
from .._wire import MAX_MESSAGE_BYTES
from . import _server_loop as aio
from ._address import Address

if TYPE_CHECKING:
    from ._server_base import ServerBase

__all__ = ["Listener", "SizeLimitedCodec", "open_listener", "unary"]

log = logging.getLogger("rlmesh_trio.transport.server")


def _too_big(size: int) -> GRPCError:
    return GRPCError(
        Status.RESOURCE_EXHAUSTED,
        f"message of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit",
    )


class SizeLimitedCodec(ProtoCodec):
    """grpclib caps no message size itself; apply wire-v1's 256 MiB in both directions.

    Messages go through :mod:`rlmesh_trio.wire`'s codec registry. An
    undecodable message becomes INVALID_ARGUMENT: without a request id no
    typed reply is possible, and grpclib would say UNKNOWN.
    """

    def encode(self, message: Any, message_type: Any) -> bytes:
        hand = wire.HAND_ENCODERS.get(message_type)
        data = super().encode(message, message_type) if hand is None else hand(message)
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        return data  # type: ignore[no-any-return]

    def decode(self, data: bytes, message_type: Any) -> Any:
        if len(data) > MAX_MESSAGE_BYTES:
            raise _too_big(len(data))
        try:
            hand = wire.HAND_DECODERS.get(message_type)
            return super().decode(data, message_type) if hand is None else hand(data)
        except Exception as exc:
            name = getattr(message_type, "__name__", "message")
            raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a {name}: {exc}") from exc


def unary(answer: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[None]]:
    """A grpclib handler for a unary method: the request (decoded by the codec) to
    ``answer``, and its reply back."""

    async def handle(stream: grpclib.server.Stream[Any, Any]) -> None:
        await stream.send_message(await answer(await stream.recv_message()))

    return handle


class _TrackingSocket(socket.socket):
    """A listening socket that remembers the connections it accepted (weakly), so that
    stopping shuts them down and a client mid-session sees its connection end at once."""

    def __init__(self, family: int, kind: int, proto: int) -> None:
        super().__init__(family, kind, proto)
        self.accepted: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    def accept(self) -> tuple[socket.socket, Any]:
        conn, peer = super().accept()
        self.accepted.add(conn)
        return conn, peer


def _bound_socket(bind: Address) -> _TrackingSocket:
    if bind.path is not None:
        sock = _TrackingSocket(socket.AF_UNIX, socket.SOCK_STREAM, 0)
        target: Any = bind.path
    else:
        family = socket.AF_INET6 if ":" in (bind.host or "") else socket.AF_INET
        # IPPROTO_TCP explicitly: accepted sockets inherit the listener's proto, and
        # asyncio sets TCP_NODELAY only when it is IPPROTO_TCP (with proto 0, Nagle
        # adds ~40 ms delayed-ACK stalls to small request/response exchanges).
        sock = _TrackingSocket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        target = (bind.host, bind.port)
    try:
        if bind.path is None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            # A socket file left by an earlier server is replaced (as asyncio's unix
            # server does); any other file there is left alone and binding fails.
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.stat(bind.path).st_mode):
                    os.unlink(bind.path)
        sock.bind(target)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _token_check(token: str, kind: str) -> Callable[[RecvRequest], Coroutine[Any, Any, None]]:
    expected = token.encode()
    refusal = f"invalid {kind} token"

    async def check(event: RecvRequest) -> None:
        if event.method_name.startswith("/grpc.health."):
            return  # health probes stay open, as orchestrators poll them unauthenticated
        supplied = event.metadata.get("authorization")
        if not isinstance(supplied, str) or not hmac.compare_digest(supplied.encode(), expected):
            raise GRPCError(Status.UNAUTHENTICATED, refusal)

    return check


class Listener:
    """One started grpclib server on our socket (asyncio side); :attr:`address` is bound."""

    def __init__(self, grpc: grpclib.server.Server, sock: _TrackingSocket, bind: Address) -> None:
        self.grpc = grpc
        self.sock = sock
        self._path = bind.path
        if bind.path is not None:
            self.address = f"unix://{bind.path}"
        else:
            host, port = sock.getsockname()[:2]
            self.address = str(Address(host=host, port=port))

    async def close(self, wait: float) -> None:
        """Stop listening and cancel the handlers (grpclib's ``close``), let them send their
        last trailers, then end our half of every accepted connection (a FIN after what
        was sent, never a reset that could lose those trailers), wait up to ``wait``
        seconds for the handlers, and remove a unix socket's file."""
        self.grpc.close()
        await aio.asyncio_sleep(0)
        for conn in list(self.sock.accepted):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
        try:
            await aio.asyncio_wait_for(self.grpc.wait_closed(), wait)
        except TimeoutError:
            log.debug("server %s: handlers still closing", self.address)
        if self._path:
            with contextlib.suppress(OSError):
                os.unlink(self._path)


async def open_listener(
    service: ServerBase, bind: Address, *, token: str | None, ssl: ssl_module.SSLContext | None
) -> Listener:
    """Start a grpclib server for ``service`` plus health on ``bind`` (asyncio side), with
    the service's HTTP/2 flow-control windows (``http2_window``; ``None``: grpclib's).

    Raises:
        OSError: the address cannot be bound (the port is taken, say).
    """
    config = None
    window = service.http2_window
    if window is not None:
        config = grpclib.config.Configuration(
            http2_connection_window_size=window, http2_stream_window_size=window
        )
    server = grpclib.server.Server([service, Health()], codec=SizeLimitedCodec(), config=config)
    if token is not None:
        listen(server, RecvRequest, _token_check(token, service.kind))
    sock = _bound_socket(bind)
    try:
        await server.start(sock=sock, ssl=ssl)
    except BaseException:
        sock.close()
        raise
    listener = Listener(server, sock, bind)
    log.info("%s server listening on %s", service.kind, listener.address)
    return listener
