"""What the env and model clients share: one connection, one Join session, their lifecycle."""

from __future__ import annotations

import contextlib
import ssl as _ssl
from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, Self

import betterproto2
import trio

from ... import _wire as wire
from ..._endpoints import EndpointInfo
from ..._errors import ConnectError, ProtocolError
from ..._protocol import core_pb
from ..._wire import GrpcError
from .._handshake import handshake_failure, handshake_request
from ._channel import ClientConnection
from ._conn import Connection, ConnectionLost
from ._health import health_on
from ._join import JoinSession

__all__ = [
    "CLOSE_GRACE",
    "SHUTDOWN_CONNECTION_LOST",
    "RemoteEndpoint",
    "code_label",
    "reply_telemetry",
]

#: Seconds ``aclose`` (and an env ``close``) wait for the server to end a half-closed stream.
CLOSE_GRACE = 1.0
SHUTDOWN_CONNECTION_LOST = "the server closed the connection before replying (shutting down)"

_NS_PER_MS = 1_000_000.0


class RemoteEndpoint:
    """A remote endpoint (``host:port``, ``tcp://``, ``http://`` or ``unix:///path``).

    ``token`` is sent verbatim as ``authorization`` metadata; ``ssl`` turns on TLS.
    The address is parsed at once: a malformed one raises :class:`InvalidSpec`.
    Used as ``async with``, the connection's reader runs in a nursery owned
    by the block; otherwise in a Trio system task that ends with :meth:`aclose`.
    """

    _session: JoinSession[Any] | None
    #: What the subclass speaks: ``env`` or ``model``, and its generated package.
    _kind: ClassVar[str]
    _pb: ClassVar[Any]

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = 10.0,
        token: str | None = None,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        self._conn = ClientConnection(
            address, connect_timeout=connect_timeout, token=token, ssl=ssl
        )
        self._info: EndpointInfo | None = None
        self._session = None
        self._last_id = 0
        self._closed = False
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._connect_lock = trio.Lock()  # a shared model client's routes share one handshake

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._conn.label!r})"

    @property
    def address(self) -> str:
        return self._conn.label

    @property
    def info(self) -> EndpointInfo | None:
        """What the handshake said (``None`` before :meth:`connect`)."""
        return self._info

    async def aclose(self) -> None:
        """Half-close the Join stream, then drop the connection. Idempotent.

        A shared model client is closed by its owner once every route is done.
        Safe in a cancelled scope when shielded (callers shield it); unshielded
        it still tears everything down without waiting.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._session is not None:
                await self._session.end(CLOSE_GRACE)
        finally:
            self._conn.close()

    async def health(self, service: str = "", *, timeout: float = 5.0) -> str | None:
        """The endpoint's gRPC health status (``SERVING``, ...; ``None``: no health
        service), asked over this client's own connection: no second one.

        Raises:
            ConnectError: as :func:`check_health`.
        """
        return await health_on(self._conn, service=service, timeout=timeout)

    def _open_session(self, conn: Connection, parse: Callable[[bytes], Any]) -> JoinSession[Any]:
        return JoinSession(conn, f"{self._service}/Join", parse, metadata=self._conn.metadata)

    @property
    def _service(self) -> str:
        return f"/rlmesh.{self._kind}.v1.{self._kind.capitalize()}Service"

    async def _handshake(self, component: str) -> bytes:
        """Connect and send the Handshake RPC; the reply's bytes.

        Raises:
            ConnectError: unreachable, refused or timed out (``connect_timeout`` each).
            HandshakeError: the endpoint refused the handshake.
        """
        request = self._pb.HandshakeRequest(base=handshake_request(component))
        try:
            return await self._conn.unary(
                f"{self._service}/Handshake", bytes(request), timeout=self._conn.connect_timeout
            )
        except GrpcError as exc:
            raise handshake_failure(self.address, exc, self._service[1:]) from None

    async def shutdown(
        self, reason: str = "owner shutdown", *, timeout: float = 10.0
    ) -> tuple[bool, str]:
        """Ask the server process to shut down (the Shutdown RPC). Returns ``(accepted, message)``.

        0.1.0 servers refuse unless started with remote shutdown allowed. When the
        server drops the connection after receiving the request but before its
        reply (0.1.0 sometimes does, as it exits), this returns ``(True,
        SHUTDOWN_CONNECTION_LOST)``. Needs no Join session.

        Raises:
            ConnectError: unreachable, failed, or ``timeout`` seconds ran out.
            ProtocolError: the reply has no ``base``.
        """
        request = self._pb.ShutdownRequest(base=core_pb.ShutdownRequest(reason=reason))
        try:
            data = await self._conn.unary(
                f"{self._service}/Shutdown", bytes(request), timeout=timeout
            )
        except ConnectError as exc:
            if isinstance(exc.__cause__, ConnectionLost):
                # A refusal always gets its reply: a drop at this point means accepted.
                return True, SHUTDOWN_CONNECTION_LOST
            raise
        except GrpcError as exc:
            raise ConnectError(
                self.address, f"shutdown failed: {exc.status.name}: {exc.message}"
            ) from None
        base = wire.parse_message(self._pb.ShutdownResponse, data).base
        if base is None:
            raise ProtocolError(
                f"{self._kind} endpoint {self.address} sent a shutdown reply with no base"
            )
        return bool(base.accepted), str(base.message)

    def _unexpected(self, operation: str, response: betterproto2.Message) -> ProtocolError:
        got, _body = betterproto2.which_one_of(response, "kind")
        return ProtocolError(
            f"{self._kind} endpoint {self.address} answered {operation} with "
            f"{got + ' response' if got else 'an empty response'}"
        )

    async def __aenter__(self) -> Self:
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        self._conn.nursery = nursery
        self._exit_stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            with trio.CancelScope(shield=True):
                await self.aclose()
        finally:
            self._conn.nursery = None
            stack, self._exit_stack = self._exit_stack, None
            if stack is not None:
                await stack.aclose()


def reply_telemetry(
    envelope: Any, request_bytes: int, response_bytes: int, *, model: bool = False
) -> dict[str, float]:
    """Telemetry for one reply: endpoint timings (ms) and encoded sizes (bytes).

    ``endpoint.total`` comes from ``endpoint_total_ns`` when the peer set it;
    the finer timings (the additive timing fields of 0.1.0, protocol notes
    §1.8) appear only when non-zero (a peer that does not time a phase leaves
    the field unset). Read field by field: this runs for every reply.
    """
    telemetry: dict[str, float] = {
        "request.bytes": float(request_bytes),
        "response.bytes": float(response_bytes),
    }
    value = envelope.endpoint_total_ns
    if value is not None:
        telemetry["endpoint.total"] = value / _NS_PER_MS
    value = envelope.decode_ns
    if value:
        telemetry["endpoint.decode"] = value / _NS_PER_MS
    value = envelope.user_ns
    if value:
        telemetry["endpoint.user"] = value / _NS_PER_MS
    value = envelope.encode_ns
    if value:
        telemetry["endpoint.encode"] = value / _NS_PER_MS
    value = envelope.adapter_ns if model else envelope.queue_ns
    if value:
        telemetry["endpoint.adapter" if model else "endpoint.queue"] = value / _NS_PER_MS
    return telemetry


def code_label(code: Any) -> str:
    """``INVALID_ACTION`` -> ``InvalidAction``: how 0.1.0 prints an error code in messages."""
    name = getattr(code, "name", None) or str(code)
    return "".join(part.capitalize() for part in name.split("_"))
