"""``check_health``: ask an endpoint for its gRPC health status (``grpc.health.v1``).

0.1.0 model servers answer ``SERVING`` for the service ``""``; 0.1.0 Python
env servers do not implement the health service at all (UNIMPLEMENTED), which
we report as ``None`` so a caller can fall back to a handshake.
"""

from __future__ import annotations

import ssl as _ssl

import grpclib.client
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

from .._errors import ConnectError, format_duration
from . import _bridge as bridge
from ._address import Address, parse_address
from ._channel import auth_metadata

__all__ = ["check_health"]


async def _aio_check(
    address: Address,
    service: str,
    metadata: dict[str, str] | None,
    ssl: _ssl.SSLContext | None,
) -> str | None:
    if address.path is not None:
        channel = grpclib.client.Channel(path=address.path, ssl=ssl)
    else:
        channel = grpclib.client.Channel(host=address.host, port=address.port, ssl=ssl)
    try:
        reply = await HealthStub(channel).Check(
            HealthCheckRequest(service=service), metadata=metadata
        )
    except GRPCError as exc:
        if exc.status is Status.UNIMPLEMENTED:
            return None
        if exc.status is Status.UNKNOWN and exc.message == "Missing content-type header":
            return None  # a grpclib server's UNIMPLEMENTED, as grpclib clients report it
        if exc.status is Status.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        raise
    finally:
        channel.close()
    if reply is None:
        return None
    return str(HealthCheckResponse.ServingStatus.Name(reply.status))


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
    and ``SERVICE_UNKNOWN`` when it does not know ``service``. Raises
    :class:`ConnectError` naming the address when it cannot be reached within
    ``timeout`` seconds or answers with another gRPC error. Opens the
    transport's asyncio loop if none is running. Cancellation: abandons the
    check and closes its connection.
    """
    parsed = parse_address(address)
    async with bridge.asyncio_loop():
        try:
            with trio.fail_after(timeout):
                return await bridge.call(_aio_check, parsed, service, auth_metadata(token), ssl)
        except trio.TooSlowError:
            raise ConnectError(
                address, f"health check timed out after {format_duration(timeout)}"
            ) from None
        except ConnectionRefusedError:
            raise ConnectError(address, "connection refused") from None
        except (OSError, StreamTerminatedError) as exc:
            raise ConnectError(address, str(exc) or type(exc).__name__) from None
        except GRPCError as exc:
            raise ConnectError(
                address, f"health check failed: {exc.status.name}: {exc.message}"
            ) from None
