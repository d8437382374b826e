"""Episode video: a per-route hook that turns an episode's frames into an mp4.

:class:`Recording` says which episodes to record (the first N of each route,
and/or given seeds) and holds what was recorded. :meth:`Recording.apply`
installs a recording hook only on routes that may record, so other routes run
exactly as before. Frames come, in order of preference, from the env's
``render()`` (an in-process env, or a remote one whose client offers it) or
from an image observation leaf (a ``uint8`` ``(H, W, 1|3|4)`` Box).

Recording is best-effort: a failing render or encode is logged, that episode
carries no media, and the route goes on.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import trio

from .._errors import InvalidSpec
from ..report._bundle import MediaRef
from ..runtime._events import (
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    ObservationEmittedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
)
from ..runtime._hooks import RuntimeHooks
from ..spaces import decode_stacked
from ._video import DEFAULT_FPS, VideoWriter, as_rgb_frame, decode_png

__all__ = ["RENDER_CAMERA", "Recording"]

log = logging.getLogger("rlmesh_trio.results")

#: Camera label of frames from the env's render() (rlmesh's label for it).
RENDER_CAMERA = "render"

FrameSource = Callable[[], Awaitable[np.ndarray | None]]


def _render_source(env: Any, local: Any = None) -> FrameSource | None:
    """An async ``() -> frame`` over a render, or ``None`` when there is none.

    ``local`` is the route's own gymnasium env when it runs in-process: its
    ``render()`` is called directly, on a worker thread, between steps (no
    PNG round trip, and an exception stays ours instead of ending the env
    session). Otherwise ``env.render()`` (a ``RemoteEnv``: a Render request;
    a failing render there is the env server's error and ends its session).
    """
    if local is not None:

        async def local_frame() -> np.ndarray | None:
            value = await trio.to_thread.run_sync(local.render)
            if isinstance(value, list):  # render_mode "rgb_array_list"
                value = value[-1] if value else None
            return None if value is None else as_rgb_frame(value)

        return local_frame
    render = getattr(env, "render", None)
    if render is None or not callable(render):
        return None

    async def frame() -> np.ndarray | None:
        reply = render()
        if isinstance(reply, Awaitable):
            reply = await reply
        data = getattr(reply, "frame", reply)  # a RenderResponse, or the bytes/array itself
        if data is None or (isinstance(data, bytes | bytearray) and not data):
            return None
        if isinstance(data, bytes | bytearray):
            return await trio.to_thread.run_sync(decode_png, bytes(data))
        return as_rgb_frame(data)

    return frame


def _image_leaf(value: Any, path: str = "observation") -> tuple[str, np.ndarray] | None:
    """The first ``(rows, H, W, C)`` uint8 leaf of a stacked observation, with its key path."""
    if isinstance(value, np.ndarray):
        if value.dtype == np.uint8 and value.ndim == 4 and value.shape[3] in (1, 3, 4):
            return path, value
        return None
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, tuple):
        items = enumerate(value)
    for key, child in items:
        found = _image_leaf(child, str(key) if path == "observation" else f"{path}.{key}")
        if found is not None:
            return found
    return None


def _observation_frame(event: ObservationEmittedEvent, row: int) -> tuple[str, np.ndarray] | None:
    if event.observation is None or event.observation_space is None:
        return None
    stacked = decode_stacked(
        event.observation_space, event.observation, len(event.env_indices), copy=False
    )
    found = _image_leaf(stacked)
    if found is None:
        return None
    camera, leaf = found
    frame = as_rgb_frame(leaf[row])
    return None if frame is None else (camera, frame)


@attrs.define
class _Take:
    """One episode being recorded."""

    episode_index: int
    writer: VideoWriter
    camera: str = ""
    use_render: bool | None = None  # None: not tried yet this episode


class _RouteRecorder(RuntimeHooks):
    """Records chosen episodes of one route. Cancellation: a cancelled frame encode
    finishes its frame first (a few ms) and the episode's file is then dropped."""

    def __init__(self, recording: Recording, route_id: str, env: Any, local: Any = None) -> None:
        self._recording = recording
        self._route_id = route_id
        self._render = _render_source(env, local)
        self._takes: dict[int, _Take] = {}  # by env_index
        # Why no frame came from a render, for the one line saying nothing was filmed.
        self._no_render = "its env offers no render()" if self._render is None else ""

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        if self._recording.wants(event.episode_index, event.seed):
            path = self._recording.staging_file(self._route_id, event.episode_index)
            writer = VideoWriter(path, self._recording.fps)
            self._takes[event.env_index] = _Take(event.episode_index, writer)

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        if event.is_reset:
            return  # one frame per step, as rlmesh's recorder films (frame count == steps)
        for row, env_index in enumerate(event.env_indices):
            take = self._takes.get(env_index)
            if take is None or take.episode_index < 0:
                continue
            try:
                await self._capture(take, event, row)
            except Exception as exc:  # best-effort: this episode goes without media
                log.warning(
                    "route %s episode %d: recording dropped: %s: %s",
                    self._route_id,
                    take.episode_index,
                    type(exc).__name__,
                    exc,
                )
                take.writer.abandon()
                take.episode_index = -1  # keep the slot so later frames are skipped

    async def _capture(self, take: _Take, event: ObservationEmittedEvent, row: int) -> None:
        frame: np.ndarray | None = None
        if take.use_render is None:
            take.use_render = self._render is not None and event.num_envs == 1
            if self._render is not None and not take.use_render:
                self._no_render = "its env is vectorized (no single render)"
            if take.use_render:
                frame = await self._first_render()
                take.use_render = frame is not None
                if frame is None and not self._no_render:
                    self._no_render = (
                        "its env's render() returned no frame (make it with "
                        "render_mode='rgb_array')"
                    )
            take.camera = RENDER_CAMERA if take.use_render else ""
        elif take.use_render:
            assert self._render is not None
            frame = await self._render()
        if not take.use_render:
            found = _observation_frame(event, row)
            if found is not None:
                take.camera, frame = found
        if frame is not None:
            await trio.to_thread.run_sync(take.writer.add, frame)

    async def _first_render(self) -> np.ndarray | None:
        """The episode's first render; an env that renders nothing falls back to observations."""
        assert self._render is not None
        try:
            return await self._render()
        except Exception as exc:  # e.g. no rgb_array render mode
            self._no_render = f"its env's render() failed ({type(exc).__name__}: {exc})"
            log.warning(
                "route %s: render() failed (%s: %s); trying image observations",
                self._route_id,
                type(exc).__name__,
                exc,
            )
            return None

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        take = self._takes.pop(event.env_index, None)
        if take is None or take.episode_index < 0:
            return
        try:
            frames = await trio.to_thread.run_sync(take.writer.finish)
        except Exception as exc:  # best-effort, as above
            log.warning(
                "route %s: video of episode %d lost: %s", self._route_id, take.episode_index, exc
            )
            take.writer.abandon()
            return
        if frames:
            self._recording.add(self._route_id, take.episode_index, take, frames)
        else:
            why = self._no_render or "no frame came from its env"
            why = f"{why}, and its observations are not images"
            self._recording.note_unfilmed(self._route_id, why)

    async def session_ended(self, event: SessionEndedEvent) -> None:
        self._drop_open()

    async def session_failed(self, event: SessionFailedEvent) -> None:
        self._drop_open()

    def _drop_open(self) -> None:
        for take in self._takes.values():
            take.writer.abandon()
        self._takes.clear()


def _gym_env(value: Any) -> Any:
    """The route's env when it is one in-process gymnasium ``Env`` (lanes and vectors: no)."""
    import gymnasium

    return value if isinstance(value, gymnasium.Env) else None


def _seed_set(seeds: Iterable[int] | None) -> frozenset[int]:
    out = set()
    for seed in seeds or ():
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidSpec(f"record seeds must be integers, got {seed!r}")
        out.add(seed)
    return frozenset(out)


class Recording:
    """Which episodes to film, and the videos filmed so far.

    ``first``: the first N episodes of every route; ``seeds``: episodes
    started with one of these seeds (either condition records). Videos are
    staged in ``directory`` (a temporary folder by default, removed by
    :meth:`close`). Use :meth:`apply` on the routes before the run, then pass
    :attr:`media` to :meth:`RunReport.export_bundle` or the HTML report.

    Raises:
        InvalidSpec: ``first`` is negative, a seed is not an integer, or ``fps`` < 1.
    """

    def __init__(
        self,
        first: int = 0,
        seeds: Iterable[int] | None = None,
        *,
        fps: int = DEFAULT_FPS,
        directory: str | Path | None = None,
    ) -> None:
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise InvalidSpec(f"record: first must be an integer >= 0, got {first!r}")
        if isinstance(fps, bool) or not isinstance(fps, int) or fps < 1:
            raise InvalidSpec(f"record: fps must be an integer >= 1, got {fps!r}")
        self.first = first
        self.seeds = _seed_set(seeds)
        self.fps = fps
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="rlmesh-trio-video-"))
        self.media: dict[tuple[str, int], list[MediaRef]] = {}
        #: Routes that were to film an episode and got no frame: route id -> why.
        self.unfilmed: dict[str, str] = {}

    @property
    def active(self) -> bool:
        return self.first > 0 or bool(self.seeds)

    def wants(self, episode_index: int, seed: int | None) -> bool:
        return episode_index < self.first or (seed is not None and seed in self.seeds)

    def records_route(self, seeds: Sequence[int] | None) -> bool:
        """Whether a route with these seeds may record (unknown seeds: it may)."""
        if self.first > 0:
            return True
        return bool(self.seeds) and (seeds is None or any(s in self.seeds for s in seeds))

    def apply(self, routes: Iterable[Any]) -> list[Any]:
        """The routes, with a recording hook on each route that may record."""
        out = []
        for i, route in enumerate(routes):
            if self.records_route(route.seeds):
                route_id = route.route_id or f"route-{i}"
                hooks = self.hooks_for(route_id, _gym_env(route.env))
                route = attrs.evolve(route, route_id=route_id, hooks=hooks)
            out.append(route)
        return out

    def hooks_for(self, route_id: str, local: Any = None) -> Callable[[Any], RuntimeHooks]:
        """The per-route hook factory (called with the route's env when it starts).

        ``local``: the route's in-process gymnasium env, if any, rendered directly.
        """
        return lambda env: _RouteRecorder(self, route_id, env, local)

    def staging_file(self, route_id: str, episode_index: int) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(
            prefix=f"{route_id}-ep{episode_index:05d}-", suffix=".mp4", dir=self.directory
        )
        os.close(handle)
        return Path(name)

    def add(self, route_id: str, episode_index: int, take: _Take, frames: int) -> None:
        ref = MediaRef(
            camera=take.camera or RENDER_CAMERA,
            source=take.writer.path,
            frame_count=frames,
            width=take.writer.width,
            height=take.writer.height,
            fps=float(self.fps),
        )
        self.media.setdefault((route_id, episode_index), []).append(ref)

    def note_unfilmed(self, route_id: str, why: str) -> None:
        """Remember (once per route) that an episode of ``route_id`` got no frame, and why."""
        self.unfilmed.setdefault(route_id, why)

    def problems(self) -> list[str]:
        """One sentence per reason some routes filmed nothing at all (empty: none such)."""
        filmed = {route_id for route_id, _ in self.media}
        by_reason: dict[str, list[str]] = {}
        # Routes end in any order: name them in their natural order (route-2 before route-10).
        for route_id, why in sorted(self.unfilmed.items(), key=lambda item: _natural(item[0])):
            if route_id not in filmed:
                by_reason.setdefault(why, []).append(route_id)
        return [
            f"filmed nothing on {', '.join(routes)}: {why}" for why, routes in by_reason.items()
        ]

    def close(self) -> None:
        """Remove the staged videos (when the folder is ours). Idempotent."""
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders the digit runs of ``name`` as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)
    )
