"""What a lane block's calls answer, built from the wire replies with numpy.

``BlockReset`` and ``BlockStep`` (``rlmesh_trio._blocks``) hold one row per
lane, in the order the lanes were asked in. Per-lane Python runs only for
lanes whose episode ended (their final info) or that carry infos at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ... import spaces
from ..._blocks import BlockStep
from ..._errors import ProtocolError
from ..._protocol import env_pb, spaces_pb
from ...runtime._episodes import meta_duration

__all__ = ["ServedBlockStep", "join_steps", "lane_infos", "step_arrays"]


@attrs.frozen(slots=True)
class ServedBlockStep(BlockStep):
    """A served block step: a :class:`BlockStep` plus the env's ``completed_episodes``.

    ``episodes`` holds the ``EpisodeMetadata`` the env sent (one per ended lane,
    carrying its ``episode_id``, ``step_count``, ``cumulative_reward``,
    timestamps and ``final_info``, plus any interrupted episode it reports), for
    a driver that books results the way the message path does.
    """

    episodes: tuple[env_pb.EpisodeMetadata, ...] = ()


def join_steps(parts: Sequence[ServedBlockStep]) -> ServedBlockStep:
    """One block from per-lane parts (the one-lane-per-request fallback), in order."""
    final: dict[int, Mapping[str, Any]] = {}
    durations: dict[int, float] = {}
    episodes: list[env_pb.EpisodeMetadata] = []
    telemetry: dict[str, float] = {}
    for part in parts:
        final.update(part.final_infos)
        durations.update(part.durations)
        episodes.extend(part.episodes)
        for name, value in part.telemetry.items():
            telemetry[name] = max(value, telemetry.get(name, 0.0))
    return ServedBlockStep(
        observations=np.concatenate([p.observations for p in parts]),
        rewards=np.concatenate([p.rewards for p in parts]),
        terminated=np.concatenate([p.terminated for p in parts]),
        truncated=np.concatenate([p.truncated for p in parts]),
        final_infos=final,
        telemetry=telemetry,
        durations=durations,
        episodes=tuple(episodes),
    )


def _mask(raw: bytes, count: int, what: str) -> np.ndarray:
    if not raw:
        return np.zeros(count, dtype=bool)
    if len(raw) != count:
        raise ProtocolError(f"env.step: {what} has {len(raw)} bytes for {count} lanes")
    return np.frombuffer(raw, dtype=np.uint8) != 0


def step_arrays(
    reply: env_pb.StepResponse,
    observations: np.ndarray,
    lanes: Sequence[int],
    telemetry: Mapping[str, float],
) -> ServedBlockStep:
    """The StepResponse to a step of ``lanes`` as arrays (the width rule of §3.3 checked).

    Raises:
        ProtocolError: a per-lane field of the wrong width.
    """
    count = len(lanes)
    rewards = np.asarray(reply.rewards, dtype=np.float64)
    if rewards.size not in (0, count):
        raise ProtocolError(f"env.step: {rewards.size} rewards for {count} lanes")
    if not rewards.size:
        rewards = np.zeros(count, dtype=np.float64)
    terminated = _mask(reply.terminated_mask, count, "terminated_mask")
    truncated = _mask(reply.truncated_mask, count, "truncated_mask")
    episodes = tuple(reply.completed_episodes)
    final: dict[int, Mapping[str, Any]] = {}
    durations: dict[int, float] = {}
    ended = np.flatnonzero(terminated | truncated)
    if ended.size:
        infos = {m.env_index: m.final_info for m in episodes if m.final_info is not None}
        # The env's own timestamps time its episodes, as on the per-lane path.
        timed = {m.env_index: meta_duration(m) for m in episodes}
        for k in ended.tolist():
            lane = lanes[k]
            info = spaces.meta_to_python(infos[lane]) if lane in infos else {}
            final[lane] = info if isinstance(info, dict) else {}
            duration = timed.get(lane)
            if duration is not None:
                durations[lane] = duration
    return ServedBlockStep(
        observations=observations,
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        final_infos=final,
        telemetry=telemetry,
        durations=durations,
        episodes=episodes,
    )


def lane_infos(infos: spaces_pb.MetaMap | None, count: int) -> list[dict[str, Any]]:
    """Each lane's info from a ``count``-lane reply's ``infos``.

    One lane: the map itself. Several: the lane-server layout (``final_info[k]``,
    see ``_envhost._values.lanes_info_map``); an unknown layout gives ``{}`` per lane.
    """
    if infos is None or not infos.entries:
        return [{} for _ in range(count)]
    converted = spaces.meta_to_python(infos)
    if not isinstance(converted, dict):
        return [{} for _ in range(count)]
    if count == 1:
        return [converted]
    per_lane = converted.get("final_info")
    if not isinstance(per_lane, list) or len(per_lane) != count:
        return [{} for _ in range(count)]
    return [info if isinstance(info, dict) else {} for info in per_lane]
