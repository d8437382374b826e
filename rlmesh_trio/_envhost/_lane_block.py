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

Errors of a subset request naming several lanes start with ``env_index K: ``
(the lane at fault); whole-width and one-lane requests keep 0.1.0's text.
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
from .._protocol import spaces_pb
from ._checks import action_error_text, find_nan
from ._conformance import Conformance
from ._host import Call, EnvFailure, invalid_action
from ._one_lane import may_be_nan, may_warn
from ._values import encode_observations, encode_stacked_observations, lanes_info_map

__all__ = ["LaneChecks", "action_failure", "empty_info", "lanes_infos", "run_lanes"]

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


def run_lanes(
    call: Call,
    op: str,
    lanes: Sequence[int],
    args: Sequence[tuple[Any, ...]],
    fn: Callable[..., T],
    named: bool,
) -> list[T]:
    """``fn(*args[k])`` for every lane, in order, as ONE timed env call of ``call``.

    Synchronous (the request's worker thread); no cancellation point.
    Raises:
        EnvFailure: INTERNAL ``"<op> failed: Type: msg"`` for the first lane whose env
            raised, prefixed ``env_index K: `` when ``named`` (a subset of several lanes).
    """
    out: list[T] = []
    append = out.append

    def each() -> None:
        for arg in args:
            append(fn(*arg))

    try:
        call.env(op, each)
    except EnvFailure as failure:
        if not named:
            raise
        raise naming(lanes[len(out)], failure) from failure
    return out


def action_failure(exc: ProtocolError, lanes: Sequence[int], named: bool) -> EnvFailure:
    """INVALID_ACTION for a malformed action slab; in a several-lane request a value
    fault names its lane (the codec counts lanes by position in the request)."""
    failure = invalid_action(action_error_text(exc))
    at = _CODEC_LANE.match(exc.detail)
    if named and at is not None and int(at[1]) < len(lanes):
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
        "_observation_spec",
        "_observation_warns",
    )

    def __init__(
        self,
        *,
        action_space: gym.Space[Any],
        observation_space: gym.Space[Any],
        observation_spec: spaces_pb.SpaceSpec,
        conformance: Conformance,
    ) -> None:
        checking = conformance.policy != "off"
        self._action_space = action_space
        self._observation_space = observation_space
        self._observation_spec = observation_spec
        self._conformance = conformance
        self._action_nan = may_be_nan(action_space)
        self._action_warns = checking and may_warn(action_space)
        self._observation_warns = checking and may_warn(observation_space)
        # A float Box: the lanes' observations stack into one array, encoded and
        # bounds-checked once (other kinds go lane by lane through the codec).
        box = observation_space if isinstance(observation_space, gym.spaces.Box) else None
        floating = box is not None and bool(np.issubdtype(box.dtype, np.floating))
        self._box = box if floating else None

    def actions(self, lanes: Sequence[int], actions: Sequence[Any], named: bool) -> Warnings:
        """Each lane's action warnings (``[]`` each where the space can have none).

        Raises:
            EnvFailure: INVALID_ACTION for a NaN element (or a warning under ``strict``),
                naming the lane in a several-lane request.
        """
        warned: Warnings = [[] for _ in lanes]
        if not (self._action_nan or self._action_warns):
            return warned
        space, conformance = self._action_space, self._conformance
        for k, (lane, action) in enumerate(zip(lanes, actions, strict=True)):
            if self._action_nan:
                nan = find_nan(space, action)
                if nan:
                    raise naming(lane, invalid_action(nan)) if named else invalid_action(nan)
            if self._action_warns:
                try:
                    warned[k] = conformance.check(lane, "action", space, action)
                except EnvFailure as failure:  # strict: the warning refuses the action
                    if not named:
                        raise
                    raise naming(lane, failure) from failure
        return warned

    def observations(
        self, what: str, lanes: Sequence[int], observations: Sequence[Any], warned: Warnings
    ) -> spaces_pb.SpaceValue:
        """The lanes' observations encoded as one slab; each lane's warnings added to
        ``warned`` (a float Box: one stack, one encode, one bounds check for all lanes).

        Raises:
            EnvFailure: INTERNAL for an observation that does not fit the space.
        """
        box, spec = self._box, self._observation_spec
        stacked = _stack(observations) if box is not None and len(lanes) > 1 else None
        if box is None or stacked is None or stacked.shape[1:] != box.shape:
            value = encode_observations(what, spec, observations)
            self._lane_by_lane(lanes, observations, warned)
            return value
        value = encode_stacked_observations(what, spec, stacked, len(lanes))
        if self._observation_warns and ((stacked > box.high).any() or (stacked < box.low).any()):
            self._lane_by_lane(lanes, observations, warned)  # who, and once per lane
        return value

    def _lane_by_lane(
        self, lanes: Sequence[int], observations: Sequence[Any], warned: Warnings
    ) -> None:
        if not self._observation_warns:
            return
        space, conformance = self._observation_space, self._conformance
        for k, (lane, obs) in enumerate(zip(lanes, observations, strict=True)):
            warned[k] += conformance.check(lane, "observation", space, obs)


def _stack(observations: Sequence[Any]) -> np.ndarray | None:
    """The observations on a leading axis, or None when they do not stack (ragged)."""
    try:
        return np.asarray(observations)
    except (ValueError, TypeError):
        return None


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
