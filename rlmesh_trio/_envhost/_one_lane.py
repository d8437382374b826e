"""The step of a one-lane endpoint (a single gymnasium env), with its per-step work planned once.

A lane endpoint's general step handles N lanes, subsets, and every space
kind; for the common one-env endpoint that generality (lists, zips, lane
loops, context managers) cost several times the checks themselves. A
:class:`OneLanePlan` is built with the host and decides once, from the
spaces, which checks can ever say anything: a NaN check only where a float
Box leaf exists, a conformance check only where a Box or Text leaf exists
(Discrete, MultiBinary and MultiDiscrete values that decode are always in
bounds) or a Box has finite bounds. A Box observation that already has the
wire dtype and shape is encoded with one ``tobytes``. Everything else goes
through exactly the general helpers, so answers and messages are the same
byte for byte.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

from .. import spaces
from .._errors import ProtocolError
from .._protocol import env_pb, spaces_pb
from .._wire._step_parts import StepParts
from ..spaces._codec import compile_spec
from ..spaces._fixed import BoxLeaf
from ..spaces._node import Node
from ._checks import action_error_text, find_nan
from ._conformance import Conformance, with_warnings
from ._episodes import EpisodeBook
from ._host import Call, invalid_action
from ._values import encode_observations, info_map

__all__ = ["OneLanePlan", "may_be_nan", "may_warn"]

_DONE = (b"\x00", b"\x01")


def may_be_nan(space: gym.Space[Any]) -> bool:
    """Whether :func:`~._checks.find_nan` can ever find something in a value of ``space``."""
    if isinstance(space, gym.spaces.Box):
        return space.dtype is not None and bool(np.issubdtype(space.dtype, np.floating))
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        subs = space.spaces.values() if isinstance(space, gym.spaces.Dict) else space.spaces
        return any(may_be_nan(sub) for sub in subs)
    return False


def may_warn(space: gym.Space[Any]) -> bool:
    """Whether :func:`~._checks.conformance_issues` can ever report a value of ``space``.

    A float Box whose bounds are all infinite cannot (NaN passes its check);
    other leaves than Box and Text are never checked.
    """
    if isinstance(space, gym.spaces.Box):
        if space.dtype is not None and np.issubdtype(space.dtype, np.floating):
            return bool(np.isfinite(space.low).any() or np.isfinite(space.high).any())
        return True
    if isinstance(space, gym.spaces.Text):
        return True
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        subs = space.spaces.values() if isinstance(space, gym.spaces.Dict) else space.spaces
        return any(may_warn(sub) for sub in subs)
    return False


def _leaves_of(value: spaces_pb.SpaceValue | list[bytes]) -> list[bytes] | None:
    """A frame's leaves (given as a message or as its leaves); None for anything else."""
    if isinstance(value, list):
        return value
    return value.leaves if type(value) is spaces_pb.SpaceValue else None


#: A Box observation of at most this many elements is bounds-checked in plain Python
#: (a handful of float compares beat four numpy calls on tiny arrays).
SMALL_BOX = 64


def finite_bounds(space: gym.Space[Any]) -> list[tuple[int, Any, Any]] | None:
    """``(flat index, low, high)`` of a small Box's finitely bounded elements, else None.

    An infinite bound cannot be crossed (NaN compares false either way), so only
    finite ones are listed; ``None`` means: not a small Box, use the general check.
    """
    if not isinstance(space, gym.spaces.Box) or space.dtype is None:
        return None
    if int(np.prod(space.shape)) > SMALL_BOX:
        return None
    lows = np.broadcast_to(space.low, space.shape).reshape(-1).tolist()
    highs = np.broadcast_to(space.high, space.shape).reshape(-1).tolist()
    bounded: list[tuple[int, Any, Any]] = []
    for index, (low, high) in enumerate(zip(lows, highs, strict=True)):
        if not (low == -np.inf and high == np.inf):
            bounded.append((index, low, high))
    return bounded


class OneLanePlan:
    """A one-lane endpoint's step, its checks chosen once from the spaces (see module doc)."""

    __slots__ = (
        "_action_leaves",
        "_action_nan",
        "_action_root",
        "_action_space",
        "_action_spec",
        "_action_warns",
        "_box",
        "_box_bounds",
        "_conformance",
        "_flat",
        "_observation_bounds",
        "_observation_space",
        "_observation_spec",
        "_observation_warns",
    )

    def __init__(
        self,
        *,
        action_space: gym.Space[Any],
        action_spec: spaces_pb.SpaceSpec,
        observation_space: gym.Space[Any],
        observation_spec: spaces_pb.SpaceSpec,
        conformance: Conformance,
    ) -> None:
        checking = conformance.policy != "off"
        self._action_space = action_space
        self._action_spec = action_spec
        self._observation_space = observation_space
        self._observation_spec = observation_spec
        self._conformance = conformance
        self._action_nan = may_be_nan(action_space)
        self._action_warns = checking and may_warn(action_space)
        self._observation_warns = checking and may_warn(observation_space)
        self._observation_bounds = finite_bounds(observation_space)
        # The action decoder called directly: what ``decode_batch`` checks first (a
        # SpaceValue with the right leaf count) is checked here, anything else goes to it
        # (so does every action of a spec that does not compile: -1 leaves never match).
        self._action_root: Node | None = None
        self._action_leaves = -1
        try:
            action_codec = compile_spec(action_spec)
        except ProtocolError:
            pass
        else:
            self._action_root = action_codec.root
            self._action_leaves = action_codec.n_leaves
        root = compile_spec(observation_spec).root
        self._box: BoxLeaf | None = root if isinstance(root, BoxLeaf) else None
        # A value the Box fast path takes has the space's dtype and shape: only its bounds
        # are left to check (when the space has them listed).
        self._box_bounds = (
            self._box is not None
            and self._observation_bounds is not None
            and self._box.wire == observation_space.dtype
            and self._box.shape == observation_space.shape
        )
        self._flat = len(observation_space.shape or ()) == 1

    def decode_action(
        self, value: spaces_pb.SpaceValue | list[bytes] | None, call: Call
    ) -> tuple[Any, list[Any]]:
        """The lane's action (a step request's frame, or that frame's leaves) and its
        conformance warnings.

        Raises:
            EnvFailure: INVALID_ACTION for a missing, malformed or NaN action.
        """
        if value is None:
            raise invalid_action("expected 1 actions, got 0")
        started = time.perf_counter_ns()
        try:
            try:
                root = self._action_root
                leaves = _leaves_of(value)
                if root is not None and leaves is not None and len(leaves) == self._action_leaves:
                    action = root.decode_lanes(leaves, 1, True)[0]
                else:  # the general decoder says what is wrong
                    frame = spaces_pb.SpaceValue(leaves=value) if isinstance(value, list) else value
                    action = spaces.decode_batch(self._action_spec, frame, 1)[0]
            except ProtocolError as exc:
                raise invalid_action(action_error_text(exc)) from exc
            if self._action_nan:
                nan = find_nan(self._action_space, action)
                if nan:
                    raise invalid_action(nan)
            warned: list[Any] = (
                self._conformance.check(0, "action", self._action_space, action)
                if self._action_warns
                else []
            )
        finally:
            call.decode_ns += time.perf_counter_ns() - started
        return action, warned

    def encode(
        self, obs: Any, info: Any, warned: list[Any], call: Call
    ) -> tuple[spaces_pb.SpaceValue, spaces_pb.MetaMap]:
        """The step's observation and infos on the wire (observation warnings added).

        Raises:
            EnvFailure: INTERNAL for an observation off its space or an info with no wire form.
        """
        leaves, infos = self.encode_parts(obs, info, warned, call)
        observation = spaces_pb.SpaceValue(leaves=leaves)
        return observation, infos if infos is not None else spaces_pb.MetaMap()

    def encode_parts(
        self, obs: Any, info: Any, warned: list[Any], call: Call
    ) -> tuple[list[bytes], spaces_pb.MetaMap | None]:
        """:meth:`encode` as the observation's leaves and the infos, None for empty
        infos (the usual step: no message built).

        Raises:
            EnvFailure: INTERNAL for an observation off its space or an info with no wire form.
        """
        started = time.perf_counter_ns()
        try:
            box = self._box
            if (
                box is not None
                and type(obs) is np.ndarray
                and obs.dtype == box.wire
                and obs.shape == box.shape
            ):
                # What the general encoder produces for this value, without stacking a copy.
                leaves = [obs.tobytes()]
                boxed = self._box_bounds
            else:
                leaves = encode_observations("step", self._observation_spec, [obs]).leaves
                boxed = False
            if self._observation_warns and not (
                self._bounds_hold(obs) if boxed else self._in_bounds(obs)
            ):
                warned = warned + self._conformance.check(
                    0, "observation", self._observation_space, obs
                )
            merged = with_warnings(info, warned)
            empty = merged is None or (type(merged) is dict and not merged)
            infos = None if empty else info_map("step", merged)
        finally:
            call.encode_ns += time.perf_counter_ns() - started
        return leaves, infos

    def _in_bounds(self, obs: Any) -> bool:
        """True when ``obs`` surely has no conformance issue (False: let the full check say)."""
        bounds = self._observation_bounds
        space = self._observation_space
        if bounds is None or type(obs) is not np.ndarray:
            return False
        if obs.shape != space.shape or obs.dtype != space.dtype:
            return False
        return self._bounds_hold(obs)

    def _bounds_hold(self, obs: np.ndarray) -> bool:
        """Whether an array of the observation space's dtype and shape is inside its
        finite bounds (listed: :attr:`_observation_bounds` is set)."""
        bounds = self._observation_bounds
        assert bounds is not None
        values = obs.tolist() if self._flat else obs.ravel().tolist()
        for index, low, high in bounds:
            value = values[index]
            if value > high or value < low:
                return False
        return True

    @staticmethod
    def answer(
        book: EpisodeBook,
        step: tuple[Any, float, bool, bool, Any],
        observation: spaces_pb.SpaceValue,
        infos: spaces_pb.MetaMap,
        subset: bool,
    ) -> env_pb.StepResponse:
        """Book the step on lane 0 and build the response (as ``LaneHost._answer_step``).

        Raises:
            Nothing of its own (the episode book only counts and records).
        """
        _, reward, terminated, truncated, _ = step
        completed = book.drain_interrupted()
        record = book.step(0, reward, terminated=terminated, truncated=truncated, final_info=infos)
        if record is not None:
            completed.append(record)
        return env_pb.StepResponse(
            observation=observation,
            rewards=[reward],
            terminated_mask=_DONE[terminated],
            truncated_mask=_DONE[truncated],
            infos=infos,
            completed_episodes=completed,
            env_indices=[0] if subset else [],
        )

    @staticmethod
    def answer_parts(
        book: EpisodeBook,
        step: tuple[Any, float, bool, bool, Any],
        leaves: list[bytes],
        infos: spaces_pb.MetaMap | None,
        subset: bool,
    ) -> StepParts:
        """:meth:`answer` as parts (``infos`` None: empty), for the served step.

        Raises:
            Nothing of its own (the episode book only counts and records).
        """
        _, reward, terminated, truncated, _ = step
        completed = book.drain_interrupted()
        record = book.step(0, reward, terminated=terminated, truncated=truncated)
        if record is not None:
            # The final infos as :meth:`answer` records them (an empty map when empty).
            record.final_info = infos if infos is not None else spaces_pb.MetaMap()
            completed.append(record)
        return StepParts(leaves, reward, terminated, truncated, infos, completed, subset)
