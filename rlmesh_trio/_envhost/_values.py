"""Shared value plumbing of the host flavours: observations, infos, options, frames."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import spaces
from .._errors import ProtocolError
from .._protocol import env_pb, spaces_pb
from ._checks import CONFORMANCE_KEY
from ._host import internal
from ._png import encode_png

__all__ = [
    "encode_observations",
    "encode_stacked_observations",
    "info_map",
    "lane_info",
    "lanes_info_map",
    "options_of",
    "render_response",
]


def options_of(options: spaces_pb.MetaMap | None) -> dict[str, Any] | None:
    """``ResetRequest.options`` as the dict handed to ``env.reset(options=...)`` (None if unset)."""
    if options is None:
        return None
    converted = spaces.meta_to_python(options)
    assert isinstance(converted, dict)
    return converted


def encode_observations(
    what: str, spec: spaces_pb.SpaceSpec, observations: Sequence[Any]
) -> spaces_pb.SpaceValue:
    try:
        return spaces.encode_batch(spec, list(observations))
    except (ProtocolError, ValueError, TypeError) as exc:
        raise internal(
            f"{what} failed: observation does not match the observation space: {exc}"
        ) from exc


def encode_stacked_observations(
    what: str, spec: spaces_pb.SpaceSpec, stacked: Any, n: int
) -> spaces_pb.SpaceValue:
    try:
        return spaces.encode_stacked(spec, stacked, n)
    except (ProtocolError, ValueError, TypeError) as exc:
        raise internal(
            f"{what} failed: observation does not match the observation space: {exc}"
        ) from exc


def info_map(what: str, info: Any) -> spaces_pb.MetaMap:
    """An info dict as a MetaMap; a value with no wire form is INTERNAL (as in 0.1.0)."""
    if info is None or (type(info) is dict and not info):
        return spaces_pb.MetaMap()  # the common case (CartPole's every step), without a walk
    try:
        return spaces.meta_map_from_python(info)
    except TypeError as exc:
        raise internal(f"{what} failed: TypeError: {exc}") from exc


def lanes_info_map(
    what: str,
    infos: Sequence[Any],
    flags: Sequence[bool],
    warnings: Sequence[Mapping[str, str]] = (),
) -> spaces_pb.MetaMap:
    """Several lanes' infos in one response, laid out as 0.1.0 lane servers do.

    Each lane's whole dict goes in ``final_info[k]`` and ``_final_info[k]`` is
    the lane's flag (true on a reset, done-ness on a step). Conformance
    warnings also appear once at the top level.
    """
    layout: dict[str, Any] = {
        "final_info": [dict(info) if info is not None else {} for info in infos],
        "_final_info": [bool(flag) for flag in flags],
    }
    if warnings:
        # Per lane inside final_info; at the top level once per (kind, path).
        top: dict[tuple[str | None, str | None], dict[str, str]] = {}
        for warning in warnings:
            top.setdefault((warning.get("kind"), warning.get("path")), dict(warning))
        layout[CONFORMANCE_KEY] = list(top.values())
    return info_map(what, layout)


def lane_info(info: Mapping[str, Any], lane: int) -> dict[str, Any]:
    """One lane's slice of a gymnasium vector info dict (keys whose ``_key`` mask is set)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if not isinstance(key, str) or key.startswith("_"):
            continue
        mask = info.get("_" + key)
        if mask is None:
            continue
        try:
            present = bool(mask[lane])
        except (IndexError, TypeError, KeyError):
            continue
        if not present:
            continue
        if isinstance(value, Mapping):
            out[key] = lane_info(value, lane)
        else:
            out[key] = value[lane]
    return out


def render_response(frame: Any) -> env_pb.RenderResponse:
    """A frame from ``env.render()`` as a RenderResponse (no frame: the empty response)."""
    if isinstance(frame, list):
        # render_mode "rgb_array_list": the most recent frame.
        frame = frame[-1] if frame else None
    if frame is None:
        return env_pb.RenderResponse()
    if isinstance(frame, bytes | bytearray):
        return env_pb.RenderResponse(frame=bytes(frame), format=env_pb.RenderFormat.PNG)
    if isinstance(frame, str):
        # "ansi" mode: text frames have no image form.
        return env_pb.RenderResponse()
    try:
        png = encode_png(np.asarray(frame))
    except ValueError as exc:
        raise internal(f"render failed: ValueError: {exc}") from exc
    return env_pb.RenderResponse(frame=png, format=env_pb.RenderFormat.PNG)
