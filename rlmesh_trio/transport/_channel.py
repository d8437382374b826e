"""Opening client channels: grpclib ``Channel`` set up for rlmesh-wire-v1 peers.

The channel uses a pass-through codec: the clients encode and decode the
betterproto2 messages themselves, which lets them count request and response
bytes for telemetry without encoding anything twice. The codec's content
subtype is ``proto``, so requests carry ``content-type: application/grpc``
exactly as 0.1.0 peers send.

Message limits: grpclib enforces no message size limit of its own; we refuse
to send a message over 256 MiB (the limit 0.1.0 peers apply on receive) with a
clear error rather than let the peer reset the stream.
"""

from __future__ import annotations

import contextlib
import ssl as _ssl
from typing import Any

import grpclib.client
import grpclib.config
import grpclib.const
import trio
from grpclib.encoding.base import CodecBase
from grpclib.exceptions import StreamTerminatedError

from .._errors import ConnectError, ProtocolError, format_duration
from .._wire import MAX_MESSAGE_BYTES
from . import _bridge as bridge
from . import _h2fast
from ._address import Address, parse_address

__all__ = [
    "ClientConnection",
    "RawCodec",
    "auth_metadata",
    "check_size",
    "new_channel",
    "unary_call",
]


class RawCodec(CodecBase):
    """Pass bytes through untouched: messages are encoded and parsed by the caller."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> bytes:
        return bytes(data)


def _client_config() -> grpclib.config.Configuration:
    # Keepalive as 0.1.0 clients do it: an HTTP/2 ping every 30 s, 10 s to answer,
    # also while idle, so a dead peer is noticed during a long quiet step. Larger
    # windows than the 64 KiB HTTP/2 default keep image observations flowing.
    return grpclib.config.Configuration(
        _keepalive_time=30.0,
        _keepalive_timeout=10.0,
        _keepalive_permit_without_calls=True,
        _http2_max_pings_without_data=0,
        _http2_min_sent_ping_interval_without_data=30.0,
        http2_connection_window_size=16 * 1024 * 1024,
        http2_stream_window_size=16 * 1024 * 1024,
    )


def new_channel(address: Address, *, ssl: _ssl.SSLContext | None = None) -> grpclib.client.Channel:
    """Create (not yet connect) a channel to ``address``. Asyncio side only.

    grpclib connects lazily; callers bound the first connect with their own
    connect timeout (``await channel.__connect__()`` under a deadline). An
    ``ssl`` context gets ALPN ``h2`` set on it.
    """
    config = _client_config()
    if ssl is not None:
        # gRPC over TLS negotiates HTTP/2 by ALPN; a caller's context may not say so.
        ssl.set_alpn_protocols(["h2"])
    if address.path is not None:
        return grpclib.client.Channel(path=address.path, codec=RawCodec(), ssl=ssl, config=config)
    return grpclib.client.Channel(
        host=address.host, port=address.port, codec=RawCodec(), ssl=ssl, config=config
    )


def auth_metadata(token: str | None) -> dict[str, str] | None:
    """Request metadata for an optional bearer token, sent verbatim as ``authorization``.

    rlmesh compares the header to the token exactly (no ``Bearer `` prefix handling).
    """
    return {"authorization": token} if token else None


def check_size(payload: bytes, what: str) -> None:
    """Refuse to send a message the peer would reject for size."""
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"{what} is {len(payload)} bytes, over the 256 MiB message limit of wire-v1 peers"
        )


async def unary_call(
    channel: grpclib.client.Channel,
    path: str,
    payload: bytes,
    *,
    metadata: dict[str, str] | None,
) -> bytes:
    """One unary RPC with raw payloads. Asyncio side (reach it through ``bridge.call``).

    Raises grpclib's ``GRPCError`` for a non-OK status and ``OSError`` /
    ``StreamTerminatedError`` when the connection fails.
    """
    check_size(payload, path)
    async with channel.request(
        path,
        grpclib.const.Cardinality.UNARY_UNARY,
        bytes,
        bytes,
        metadata=metadata,
    ) as stream:
        await stream.send_message(payload, end=True)
        reply = await stream.recv_message()
    if reply is None:
        raise ProtocolError(f"{path} returned no message")
    return bytes(reply)


class ClientConnection:
    """One client's channel to one endpoint, used from Trio.

    Creates the grpclib channel on the asyncio side, bounds the first
    connect by ``connect_timeout``, and maps connection failures to
    :class:`ConnectError` naming the address. grpclib reconnects lazily
    if the connection later drops.
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
        self.metadata = auth_metadata(token)
        self._ssl = ssl
        self._channel: grpclib.client.Channel | None = None
        self._closed = False
        self._fast_reads: object = None  # the grpclib protocol whose reads skip the sync

    @property
    def channel(self) -> grpclib.client.Channel:
        if self._channel is None:
            raise RuntimeError(f"{self.label}: not connected")
        return self._channel

    async def _aio_connect(self) -> None:
        if self._channel is None:
            self._channel = new_channel(self.address, ssl=self._ssl)
        protocol = await self._channel.__connect__()
        if protocol is not self._fast_reads:
            # Responses are delivered from the read callback (see _join), so the
            # loop pass trio-asyncio waits for after each read buys nothing.
            self._fast_reads = protocol
            _read_without_sync(protocol)
            # DATA-only reads (every hot-path response) skip h2's generic frame walk.
            _h2fast.install_fast_receive(protocol)

    async def connect(self) -> None:
        """Open the connection within ``connect_timeout`` seconds.

        Raises :class:`ConnectError` when the endpoint is unreachable, refuses
        the connection, or does not answer in time. Cancellation: cancels the
        pending connect; the channel stays usable for a later attempt.
        """
        if self._closed:
            raise ConnectError(self.label, "the client was closed")
        bridge.require_loop(f"connecting to {self.label}")
        try:
            with trio.fail_after(self.connect_timeout):
                await bridge.call(self._aio_connect)
        except trio.TooSlowError:
            raise ConnectError(
                self.label, f"timed out after {format_duration(self.connect_timeout)}"
            ) from None
        except (OSError, StreamTerminatedError) as exc:
            raise ConnectError(self.label, _describe_os_error(exc)) from exc

    async def unary(self, path: str, payload: bytes, *, timeout: float | None) -> bytes:
        """One unary RPC (connecting first if needed).

        Raises :class:`ConnectError` for transport failures; grpclib's
        ``GRPCError`` propagates for the caller to map.
        """
        if self._channel is None:
            await self.connect()
        try:
            with trio.fail_after(timeout) if timeout is not None else contextlib.nullcontext():
                return await bridge.call(
                    unary_call, self.channel, path, payload, metadata=self.metadata
                )
        except trio.TooSlowError:
            raise ConnectError(
                self.label, f"{path} timed out after {format_duration(timeout or 0)}"
            ) from None
        except (OSError, StreamTerminatedError) as exc:
            raise ConnectError(self.label, _describe_os_error(exc)) from exc

    def close(self) -> None:
        """Drop the connection. Idempotent, never blocks (safe in a cancelled scope)."""
        self._closed = True
        channel, self._channel = self._channel, None
        if channel is not None:
            bridge.post(channel.close)


def _read_without_sync(protocol: Any) -> bool:
    """Hand a fresh grpclib connection's socket reads to :func:`bridge.read_without_sync`."""
    try:
        sock = protocol.connection._transport.get_extra_info("socket")
        fd = sock.fileno()
    except Exception:
        return False
    return bridge.read_without_sync(fd)


def _describe_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, FileNotFoundError):
        return "no such unix socket"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
