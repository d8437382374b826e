"""Encoding episode frames to mp4 in-process with PyAV (its wheel ships the codecs).

PyAV comes with the ``video`` extra (``pip install 'rlmesh-trio[video]'``).

AV1 (SVT-AV1) is preferred, as rlmesh's recorder writes AV1 mp4; VP9 and then
H.264 are the fallbacks when a PyAV build lacks it. Frames are RGB ``uint8``
``(H, W, 3)`` arrays (grey and RGBA are converted); odd sizes are padded by
one pixel, since 4:2:0 video needs even dimensions.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .._extras import require

__all__ = ["DEFAULT_FPS", "VideoWriter", "as_rgb_frame", "decode_png"]

#: Playback rate of recorded videos (rlmesh's recorder default).
DEFAULT_FPS = 30
#: Encoders tried in order, with their speed options.
_ENCODERS: tuple[tuple[str, dict[str, str]], ...] = (
    ("libsvtav1", {"preset": "12"}),
    ("libvpx-vp9", {"deadline": "realtime", "cpu-used": "8"}),
    ("libx264", {"preset": "veryfast"}),
)


def _av() -> ModuleType:
    return require("av", extra="video", purpose="recording episodes to mp4 (PyAV)")


def _encoder() -> tuple[str, dict[str, str]]:
    av = _av()
    for name, options in _ENCODERS:
        try:
            av.codec.Codec(name, "w")
        except Exception:  # this PyAV build lacks the encoder: try the next one
            continue
        return name, options
    raise RuntimeError("PyAV has none of the encoders libsvtav1, libvpx-vp9, libx264")


def as_rgb_frame(value: Any) -> np.ndarray | None:
    """``value`` as a contiguous RGB uint8 ``(H, W, 3)`` array, or ``None`` if it is no image.

    Floats in ``[0, 1]`` are scaled to ``0..255``; other values are clipped.
    """
    array = np.asarray(value)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or array.shape[2] not in (1, 3, 4) or min(array.shape[:2]) < 2:
        return None
    if array.dtype != np.uint8:
        floats = array.astype(np.float64)
        if floats.size and floats.min() >= 0.0 and floats.max() <= 1.0:
            floats = floats * 255.0
        array = floats.clip(0, 255).astype(np.uint8)
    if array.shape[2] == 1:
        array = np.repeat(array, 3, axis=2)
    elif array.shape[2] == 4:
        array = array[:, :, :3]
    return np.ascontiguousarray(array)


def decode_png(data: bytes) -> np.ndarray:
    """PNG bytes (a Render reply's frame) to an RGB uint8 array.

    Raises:
        ValueError: the bytes are not a decodable image.
    """
    av = _av()
    try:
        container: Any = av.open(io.BytesIO(data), mode="r", format="png_pipe")
        with container:
            for frame in container.decode(video=0):
                return np.ascontiguousarray(frame.to_ndarray(format="rgb24"))
    except av.FFmpegError as exc:
        raise ValueError(f"not a PNG frame: {exc}") from None
    raise ValueError("PNG stream held no frame")


class VideoWriter:
    """One mp4 file, written frame by frame (one frame in memory at a time).

    The first frame fixes the size; later frames of another size are resized
    by cropping/padding to it so one odd frame never ends the video.
    Not thread-safe; not async (each :meth:`add` encodes on the calling thread).
    """

    def __init__(self, path: str | Path, fps: int = DEFAULT_FPS) -> None:
        self.path = Path(path)
        self.fps = fps
        self.frames = 0
        self.width = 0
        self.height = 0
        self._container: Any = None
        self._stream: Any = None

    def _open(self, height: int, width: int) -> None:
        av = _av()
        # SVT-AV1 prints its banner and config to stderr unless told otherwise (1 = errors).
        os.environ.setdefault("SVT_LOG", "1")
        name, options = _encoder()
        self.height, self.width = height + height % 2, width + width % 2
        self._container = av.open(str(self.path), mode="w", format="mp4")
        stream = self._container.add_stream(name, rate=self.fps, options=options)
        stream.width, stream.height, stream.pix_fmt = self.width, self.height, "yuv420p"
        self._stream = stream

    def _fit(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[:2] == (self.height, self.width):
            return frame
        fitted = np.zeros((self.height, self.width, 3), np.uint8)
        h, w = min(self.height, frame.shape[0]), min(self.width, frame.shape[1])
        fitted[:h, :w] = frame[:h, :w]
        return fitted

    def add(self, frame: np.ndarray) -> None:
        """Encode one RGB uint8 ``(H, W, 3)`` frame."""
        av = _av()
        if self._container is None:
            self._open(frame.shape[0], frame.shape[1])
        picture = av.VideoFrame.from_ndarray(self._fit(frame), format="rgb24")
        for packet in self._stream.encode(picture):
            self._container.mux(packet)
        self.frames += 1

    def finish(self) -> int:
        """Flush and close the file; returns the frame count (0: no file was written)."""
        if self._container is None:
            return 0
        try:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
        finally:
            self._container.close()
            self._container = None
        return self.frames

    def abandon(self) -> None:
        """Close without caring about the file (after an error); never raises."""
        container, self._container = self._container, None
        if container is not None:
            try:
                container.close()
            except Exception:  # the file is discarded anyway
                pass
        self.path.unlink(missing_ok=True)
