"""Render frames to PNG bytes (RenderResponse.frame), with no imaging dependency.

A frame is an ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` or ``(H, W, 4)`` array
of uint8 (other dtypes are clipped to 0..255). PNG is zlib-compressed
scanlines with filter byte 0, framed by three chunks; that is all we need.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

__all__ = ["encode_png"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour types by channel count: grey, grey+alpha, RGB, RGBA.
_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(frame: Any) -> bytes:
    """Encode one image array as PNG; raise ``ValueError`` for an array that is not an image."""
    arr = np.asarray(frame)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in _COLOUR_TYPES or 0 in arr.shape[:2]:
        raise ValueError(f"a render frame must be (H, W[, 1|2|3|4]), got shape {arr.shape}")
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    height, width, channels = arr.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPES[channels], 0, 0, 0)
    rows = np.ascontiguousarray(arr).reshape(height, width * channels)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 6))
        + _chunk(b"IEND", b"")
    )
