"""``check_health``: ask an endpoint for its gRPC health status (``grpc.health.v1``).

0.1.0 model servers answer ``SERVING`` for the service ``""``; 0.1.0 Python
env servers do not implement the health service at all (UNIMPLEMENTED), which
we report as ``None`` so a caller can fall back to a handshake. The two tiny
health messages are encoded by hand (one string field out, one enum in).
"""

from __future__ import annotations

import ssl as _ssl

from ..._errors import ConnectError
from ..._wire import GrpcError, GrpcStatus
from ..._wire._pb import DECODE_ERRORS, fields, put_len
from ._channel import ClientConnection, time_limit

__all__ = ["check_health", "health_on"]

_CHECK = "/grpc.health.v1.Health/Check"
#: grpc.health.v1.HealthCheckResponse.ServingStatus
_STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _request(service: str) -> bytes:
    out = bytearray()
    if service:
        put_len(out, 0x0A, service.encode())  # HealthCheckRequest.service = 1
    return bytes(out)


def _status_name(data: bytes) -> str:
    status = 0
    try:
        for number, _wire, value in fields(data):
            if number == 1 and isinstance(value, int):  # HealthCheckResponse.status = 1
                status = value
    except DECODE_ERRORS:
        return "UNKNOWN"
    return _STATUS_NAMES.get(status, f"UNKNOWN({status})")


async def check_health(
    address: str,
    *,
    service: str = "",
    timeout: float = 5.0,
    token: str | None = None,
    ssl: _ssl.SSLContext | None = None,
) -> str | None:
    """The endpoint's health status name (``SERVING``, ``NOT_SERVING``, ...).

    Returns ``None`` when the endpoint does not implement the health service,
    and ``SERVICE_UNKNOWN`` when it does not know ``service``.

    Raises:
        ConnectError: naming the address, when it cannot be reached within
            ``timeout`` seconds, is not a gRPC endpoint, or answers with
            another gRPC error.
    Cancellation: abandons the check and closes its connection.
    """
    client = ClientConnection(address, connect_timeout=timeout, token=token, ssl=ssl)
    try:
        return await health_on(client, service=service, timeout=timeout)
    finally:
        client.close()


async def health_on(
    client: ClientConnection, *, service: str = "", timeout: float = 5.0
) -> str | None:
    """:func:`check_health` over ``client``, a connection already open (or opened now):
    one more stream on it, no connection of its own (a server that allows a client one
    connection, ``max-connections=1``, answers it too). The connection stays open.

    Raises:
        ConnectError: as :func:`check_health`.
    """
    address = client.label
    try:
        with time_limit(timeout, lambda why: ConnectError(address, f"health check {why}")):
            data = await client.unary(_CHECK, _request(service), timeout=timeout)
    except GrpcError as exc:
        if exc.status is GrpcStatus.UNIMPLEMENTED:
            return None
        if exc.status is GrpcStatus.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        raise ConnectError(
            address, f"health check failed: {exc.status.name}: {exc.message}"
        ) from None
    return _status_name(data)
