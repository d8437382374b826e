"""Turning Join responses into telemetry and error text (shared by the env and model clients)."""

from __future__ import annotations

from typing import Any

__all__ = ["code_label", "reply_telemetry"]

_NS_PER_MS = 1_000_000.0


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
