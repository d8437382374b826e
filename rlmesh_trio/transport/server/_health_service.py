"""The gRPC health service both servers answer (``grpc.health.v1.Health``).

The server as a whole (service ``""``) is ``SERVING`` while it runs; any other
service name is unknown (NOT_FOUND for Check, ``SERVICE_UNKNOWN`` for Watch).
The two tiny messages are encoded by hand (one string field in, one enum out).
"""

from __future__ import annotations

from ... import _wire as wire
from ..._wire._pb import DECODE_ERRORS, fields, text
from ._call import Handler, ServerCall

__all__ = ["health_routes"]

_SERVING = b"\x08\x01"  # HealthCheckResponse.status = SERVING
_SERVICE_UNKNOWN = b"\x08\x03"


def _service_name(data: bytes | None) -> str:
    if data is None:
        raise wire.GrpcError(wire.GrpcStatus.INTERNAL, "no request message")
    try:
        for number, _wire, value in fields(data):
            if number == 1 and isinstance(value, bytes):  # HealthCheckRequest.service = 1
                return text(value)
    except DECODE_ERRORS as exc:
        raise wire.GrpcError(
            wire.GrpcStatus.INVALID_ARGUMENT, f"bad health request: {exc}"
        ) from None
    return ""


async def _check(call: ServerCall) -> None:
    if _service_name(await call.recv()):
        raise wire.GrpcError(wire.GrpcStatus.NOT_FOUND)
    call.send_now(_SERVING)  # written with the trailers, in one write


async def _watch(call: ServerCall) -> None:
    known = not _service_name(await call.recv())
    call.send_headers()
    await call.send(_SERVING if known else _SERVICE_UNKNOWN)
    while await call.recv() is not None:  # until the client gives up on the stream
        pass


def health_routes() -> dict[str, Handler]:
    return {"/grpc.health.v1.Health/Check": _check, "/grpc.health.v1.Health/Watch": _watch}
