"""``rlmesh.result.v1`` bundles: ``result.json`` plus a ``media/`` tree, as a folder or a zip.

The document has the layout and keys of the one rlmesh 0.1.0's ``Recorder``
writes, checked key by key against rlmesh's own ``rlmesh.recorder`` classes
(rlmesh 0.1.0 has no bundle reader; its managed platform ingests the
format). One workload per route: the route's
model and env labels, ``task`` = the route id (two routes on the same env
stay apart), and ``config`` carrying the route's status. Media files live at
``media/w{ordinal:03d}-{model}/{task}/ep{index:05d}/{camera}.mp4``, the layout
rlmesh's recorder uses.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import InvalidSpec

if TYPE_CHECKING:
    from ..runtime._results import EpisodeResult
    from ._outcome import RouteOutcome, RouteSet

__all__ = [
    "MEDIA_DIR",
    "RESULT_FILENAME",
    "SCHEMA",
    "MediaRef",
    "bundle_document",
    "media_path",
    "sanitize_part",
    "write_bundle",
]

SCHEMA = "rlmesh.result.v1"
RESULT_FILENAME = "result.json"
MEDIA_DIR = "media"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

#: ``(route_id, episode index on the route)`` -> that episode's media.
MediaIndex = Mapping[tuple[str, int], Sequence["MediaRef"]]


def sanitize_part(part: str) -> str:
    """One path segment reduced to ``[A-Za-z0-9._-]`` (what rlmesh's bundle layout allows)."""
    cleaned = _UNSAFE.sub("_", part).strip("._-")
    return cleaned or "unnamed"


def workload_prefix(ordinal: int, model: str, task: str) -> str:
    return f"w{ordinal:03d}-{sanitize_part(model)}/{sanitize_part(task)}"


def media_path(prefix: str, episode: int, camera: str, extension: str = "mp4") -> str:
    """Bundle-relative path of one episode's video for ``camera``."""
    return f"{MEDIA_DIR}/{prefix}/ep{episode:05d}/{sanitize_part(camera)}.{extension}"


@attrs.frozen
class MediaRef:
    """One recorded video of an episode: its manifest facts and where its bytes are now.

    ``source`` is the local file holding the bytes (a staged recording); the
    bundle path is given when a bundle is written (:func:`media_path`).
    """

    camera: str
    source: Path = attrs.field(converter=Path)
    frame_count: int = attrs.field(validator=attrs.validators.ge(1))
    width: int = attrs.field(validator=attrs.validators.ge(1))
    height: int = attrs.field(validator=attrs.validators.ge(1))
    fps: float = attrs.field(validator=attrs.validators.gt(0))
    kind: str = "video"
    format: str = "mp4"

    def to_dict(self, path: str) -> dict[str, Any]:
        """The document's MediaRef row, with ``path`` its place in the bundle."""
        return {
            "camera": self.camera,
            "kind": self.kind,
            "path": path,
            "format": self.format,
            "frameCount": self.frame_count,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
        }


def _episode_record(
    position: int, ep: EpisodeResult, media: Sequence[tuple[str, MediaRef]]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": position,
        "seed": ep.seed,
        "steps": ep.steps,
        "reward": ep.reward,
        "terminated": ep.terminated,
        "truncated": ep.truncated,
        "success": ep.success,
        "durationS": ep.duration_s,
        "includedInMetrics": True,
    }
    if media:
        out["media"] = [ref.to_dict(path) for path, ref in media]
    return out


#: ``(route_id, episode index)`` -> ``(bundle path, media)`` pairs.
PlacedMedia = dict[tuple[str, int], list[tuple[str, "MediaRef"]]]


def placed_media(report: RouteSet, media: MediaIndex) -> PlacedMedia:
    """Each episode's media with its bundle path, keyed like ``media``."""
    placed: PlacedMedia = {}
    for ordinal, outcome in enumerate(report.routes):
        prefix = workload_prefix(ordinal, outcome.model, outcome.route_id)
        for position, ep in enumerate(outcome.episodes):
            key = (outcome.route_id, ep.index)
            refs = media.get(key, ())
            if refs:
                placed[key] = [(media_path(prefix, position, ref.camera), ref) for ref in refs]
    return placed


def _workload(
    outcome: RouteOutcome, placed: Mapping[tuple[str, int], Sequence[tuple[str, MediaRef]]]
) -> dict[str, Any]:
    episodes = list(outcome.episodes)
    rewards = [ep.reward for ep in episodes]
    success = None
    if episodes and all(ep.success is not None for ep in episodes):
        success = sum(1 for ep in episodes if ep.success) / len(episodes)
    return {
        "model": outcome.model,
        "env": outcome.env,
        "task": outcome.route_id,
        "config": route_config(outcome),
        "numEpisodes": len(episodes),
        "metrics": {
            "meanReward": sum(rewards) / len(rewards) if rewards else 0.0,
            "successRate": success,
            "totalSteps": sum(ep.steps for ep in episodes),
        },
        "episodes": [
            _episode_record(i, ep, placed.get((outcome.route_id, ep.index), ()))
            for i, ep in enumerate(episodes)
        ],
    }


def route_config(outcome: RouteOutcome) -> dict[str, Any]:
    """The workload's free-form ``config``: the route id, its status and its error kind."""
    error = None if outcome.error is None else type(outcome.error).__name__
    return {"routeId": outcome.route_id, "status": outcome.status, "error": error}


def bundle_document(
    report: RouteSet,
    media: MediaIndex | None = None,
    *,
    result_set_id: str | None = None,
    recorded_at: str | None = None,
) -> dict[str, Any]:
    """The ``rlmesh.result.v1`` document of ``report``: one workload per route, in route order."""
    placed = placed_media(report, media or {})
    return {
        "schema": SCHEMA,
        "resultSetId": result_set_id or uuid.uuid4().hex,
        "recordedAt": recorded_at or datetime.now(UTC).isoformat(),
        "workloads": [_workload(outcome, placed) for outcome in report.routes],
    }


def _assets(report: RouteSet, media: MediaIndex) -> list[tuple[str, MediaRef]]:
    return [pair for pairs in placed_media(report, media).values() for pair in pairs]


def _write_zip(path: Path, payload: str, assets: list[tuple[str, MediaRef]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RESULT_FILENAME, payload)
        for rel, ref in assets:
            if ref.source.is_file():
                # mp4 is already compressed: store it.
                archive.write(ref.source, rel, compress_type=zipfile.ZIP_STORED)


def _write_folder(path: Path, payload: str, assets: list[tuple[str, MediaRef]]) -> None:
    if path.exists() and not path.is_dir():
        raise InvalidSpec(f"bundle {path}: exists and is not a folder (name it .zip for a zip)")
    old_media = path / MEDIA_DIR
    if old_media.is_dir():
        if not (path / RESULT_FILENAME).is_file():
            raise InvalidSpec(
                f"bundle {path}: has a media/ folder but no {RESULT_FILENAME}; not overwriting"
            )
        shutil.rmtree(old_media)
    path.mkdir(parents=True, exist_ok=True)
    (path / RESULT_FILENAME).write_text(payload, encoding="utf-8")
    for rel, ref in assets:
        if ref.source.is_file():
            target = path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ref.source, target)


def write_bundle(
    report: RouteSet,
    path: str | Path,
    media: MediaIndex | None = None,
    *,
    result_set_id: str | None = None,
) -> Path:
    """Write ``report`` (and ``media``) as a bundle: a zip when ``path`` ends ``.zip``, else a
    folder. Returns the path.

    A folder that already holds a bundle is refreshed (its old ``media/`` removed).

    Raises:
        InvalidSpec: ``path`` is a file but not a ``.zip``, or a folder holding media
            that is not a bundle.
        OSError: the file system refused a write.
    """
    path = Path(path)
    media = media or {}
    document = bundle_document(report, media, result_set_id=result_set_id)
    payload = json.dumps(document, indent=2)
    if path.suffix.lower() == ".zip":
        _write_zip(path, payload, _assets(report, media))
    else:
        _write_folder(path, payload, _assets(report, media))
    return path
