"""The per-request checks of a lane endpoint's multi-lane requests, O(lanes) and batched.

A request naming several lanes (``CAP_MULTI_LANE_SUBSET``: a lane block, one
``StepRequest`` for every lane of a route) used to pay every per-lane check
in Python, plus a per-lane info map, plus the 0.1.0 per-lane info layout in
``infos`` even when every lane's info is empty (encoding and parsing that
layout cost more than the lanes' env steps). A :class:`LaneChecks`, built
once with the host, decides from the spaces which checks can ever say
anything (as :class:`~._one_lane.OneLanePlan` does for one lane): no NaN or
bounds check on Discrete actions, one bounds check over the stacked
observations of a Box space (per-lane checks, with their once-per-lane
reporting, only when that finds something).

Answers keep their meaning: a lane's warnings, a lane's final info and the
0.1.0 lane layout in ``infos`` whenever any lane has an info or a warning.
Only a multi-lane subset answer whose lanes all have empty infos and no
warnings carries an empty ``infos`` (the layout would repeat the masks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from .._errors import ProtocolError
from .._wire import spaces_pb
from ._checks import action_error_text, find_nan
from ._conformance import Conformance
from ._host import EnvFailure, invalid_action
from ._one_lane import may_be_nan, may_warn
from ._values import lanes_info_map

__all__ = ["LaneChecks", "action_failure", "empty_info", "lanes_infos", "on_lane"]

T = TypeVar("T")
Warnings = list[list[dict[str, str]]]
#: The codec's per-lane prefix: the lane's position in the request.
_CODEC_LANE = re.compile(r"^lane (\d+): ")


def naming(lane: int, failure: EnvFailure) -> EnvFailure:
    """``failure`` with its message prefixed ``env_index K: `` (a several-lane request's)."""
    return EnvFailure(
        failure.code,
        f"env_index {lane}: {failure.message}",
        recoverable=failure.recoverable,
        end_stream=failure.end_stream,
        debug_info=failure.debug_info,
    )


def on_lane(named: bool, lane: int, run: Callable[..., T], *args: Any) -> T:
    """``run(*args)`` for ``lane``; with ``named`` (several lanes), its failure names the lane.

    Raises:
        EnvFailure: ``run``'s, prefixed ``env_index K: `` when ``named``.
    """
    try:
        return run(*args)
    except EnvFailure as failure:
        if not named:
            raise
        raise naming(lane, failure) from failure


def action_failure(exc: ProtocolError, lanes: Sequence[int]) -> EnvFailure:
    """INVALID_ACTION for a malformed action slab; in a several-lane request a value
    fault names its lane (the codec counts lanes by position in the request)."""
    failure = invalid_action(action_error_text(exc))
    at = _CODEC_LANE.match(exc.detail)
    if len(lanes) > 1 and at is not None and int(at[1]) < len(lanes):
        return naming(lanes[int(at[1])], failure)
    return failure


def empty_info(info: Any) -> bool:
    """Whether an env's info says nothing (``None`` or an empty mapping)."""
    return info is None or (isinstance(info, Mapping) and not info)


class LaneChecks:
    """The action and observation checks of several lanes, chosen once from the spaces."""

    __slots__ = (
        "_action_nan",
        "_action_space",
        "_action_warns",
        "_box",
        "_conformance",
        "_observation_space",
        "_observation_warns",
    )

    def __init__(
        self,
        *,
        action_space: gym.Space[Any],
        observation_space: gym.Space[Any],
        conformance: Conformance,
    ) -> None:
        checking = conformance.policy != "off"
        self._action_space = action_space
        self._observation_space = observation_space
        self._conformance = conformance
        self._action_nan = may_be_nan(action_space)
        self._action_warns = checking and may_warn(action_space)
        self._observation_warns = checking and may_warn(observation_space)
        self._box = observation_space if isinstance(observation_space, gym.spaces.Box) else None

    def actions(self, lanes: Sequence[int], actions: Sequence[Any]) -> Warnings:
        """Each lane's action warnings (``[]`` each where the space can have none).

        Raises:
            EnvFailure: INVALID_ACTION for a NaN element (or a warning under ``strict``),
                naming the lane in a several-lane request.
        """
        warned: Warnings = [[] for _ in lanes]
        if not (self._action_nan or self._action_warns):
            return warned
        space, conformance, named = self._action_space, self._conformance, len(lanes) > 1
        for k, (lane, action) in enumerate(zip(lanes, actions, strict=True)):
            if self._action_nan:
                nan = find_nan(space, action)
                if nan:
                    raise naming(lane, invalid_action(nan)) if named else invalid_action(nan)
            if self._action_warns:
                warned[k] = on_lane(named, lane, conformance.check, lane, "action", space, action)
        return warned

    def observations(
        self, lanes: Sequence[int], observations: Sequence[Any], warned: Warnings
    ) -> None:
        """Add each lane's observation warnings to ``warned`` (one stacked check for a Box)."""
        if not self._observation_warns:
            return
        box = self._box
        if box is not None and len(lanes) > 1 and self._in_bounds(box, observations):
            return
        space, conformance = self._observation_space, self._conformance
        for k, (lane, obs) in enumerate(zip(lanes, observations, strict=True)):
            warned[k] += conformance.check(lane, "observation", space, obs)

    @staticmethod
    def _in_bounds(box: gym.spaces.Box, observations: Sequence[Any]) -> bool:
        """Whether every lane's observation is surely inside the Box (NaN passes, as per lane)."""
        try:
            stacked = np.asarray(observations)
        except (ValueError, TypeError):
            return False  # ragged: the per-lane checks say what is wrong
        if stacked.shape[1:] != box.shape:
            return False
        return not ((stacked > box.high).any() or (stacked < box.low).any())


def lanes_infos(
    what: str, infos: Sequence[Any], flags: Sequence[bool], warned: Warnings, subset: bool
) -> spaces_pb.MetaMap:
    """``infos`` of a several-lane answer: the 0.1.0 lane layout, or (a subset request whose
    lanes have no info and no warning) the empty map.

    Raises:
        EnvFailure: INTERNAL for an info with no wire form.
    """
    if subset and not any(warned) and all(empty_info(info) for info in infos):
        return spaces_pb.MetaMap()
    return lanes_info_map(what, infos, flags, [w for ws in warned for w in ws])
