"""Turning Join responses into telemetry and error text (shared by the env and model clients)."""

from __future__ import annotations

from typing import Any

__all__ = ["code_label", "reply_telemetry"]

_NS_PER_MS = 1_000_000.0

# (response field, metric) for the additive timing fields of 0.1.0 (protocol notes §1.8).
_ENV_TIMINGS = (
    ("decode_ns", "endpoint.decode"),
    ("user_ns", "endpoint.user"),
    ("encode_ns", "endpoint.encode"),
    ("queue_ns", "endpoint.queue"),
)
_MODEL_TIMINGS = (
    ("decode_ns", "endpoint.decode"),
    ("user_ns", "endpoint.user"),
    ("encode_ns", "endpoint.encode"),
    ("adapter_ns", "endpoint.adapter"),
)


def reply_telemetry(
    envelope: Any, request_bytes: int, response_bytes: int, *, model: bool = False
) -> dict[str, float]:
    """Telemetry for one reply: endpoint timings (ms) and encoded sizes (bytes).

    ``endpoint.total`` comes from ``endpoint_total_ns`` when the peer set it;
    the finer timings appear only when non-zero (a peer that does not time a
    phase leaves the field unset).
    """
    telemetry: dict[str, float] = {
        "request.bytes": float(request_bytes),
        "response.bytes": float(response_bytes),
    }
    total = envelope.endpoint_total_ns
    if total is not None:
        telemetry["endpoint.total"] = total / _NS_PER_MS
    for field, metric in _MODEL_TIMINGS if model else _ENV_TIMINGS:
        value = getattr(envelope, field, 0)
        if value:
            telemetry[metric] = value / _NS_PER_MS
    return telemetry


def code_label(code: Any) -> str:
    """``INVALID_ACTION`` -> ``InvalidAction``: how 0.1.0 prints an error code in messages."""
    name = getattr(code, "name", None) or str(code)
    return "".join(part.capitalize() for part in name.split("_"))
