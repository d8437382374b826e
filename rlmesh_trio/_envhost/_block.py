"""A lane block over a host's gymnasium envs: many lanes reset or stepped per call, on arrays.

:func:`block_of` finds the block of an :class:`~._host.EnvHost` whose lanes the
runtime resets itself: a list of single envs (:class:`~._lanes.LaneHost`) or a
gymnasium ``VectorEnv`` with autoreset DISABLED (:class:`~._vector.VectorHost`),
with an array observation space (Box, Discrete) and an action space whose
checks run vectorized (Discrete: the integer range; Box: shape, NaN, and
bounds under the ``strict`` validation policy). Anything else has no block
and stays on the message path.

The checks and messages are the message path's (``_checks.py``): an invalid
action is INVALID_ACTION with the codec's text, an env exception is INTERNAL
``"<what> failed: Type: msg"``; each raised as :class:`EnvRpcError` naming the
lane (``env_index``). Under the ``warn`` policy out-of-bounds values are
delivered as on the message path, but their conformance warnings are not
collected (no step info leaves a block).

An idle lane of a ``VectorEnv`` (one the caller does not step, e.g. once the
budget has no episode for it) is still stepped by gymnasium: it gets its last
action again, and when it had ended it is first reset without a seed, because
gymnasium refuses to step a finished sub-env in DISABLED mode. What it returns
is dropped; its next use by the caller is a reset.

Everything here is synchronous (the caller picks the thread); nothing awaits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from .._blocks import BlockReset, BlockStep
from .._errors import EnvRpcError
from .._protocol import env_pb
from ._checks import conformance_issues
from ._conformance import Conformance
from ._host import EnvHost
from ._lanes import LaneHost
from ._legacy import normalize_reset, normalize_step, reset_env
from ._values import lane_info
from ._vector import VectorHost, autoreset_mode_of

__all__ = ["EnvBlock", "block_of"]

#: (row at fault, message) of an action check, or None when every row passes.
Fault = tuple[int, str] | None


def _labelled(kind: str, code: env_pb.EnvErrorCode, message: str, lane: int | None) -> EnvRpcError:
    # The message path's text: "environment error: [InvalidAction] ..." (LocalEnv._settled).
    label = "".join(part.capitalize() for part in code.name.split("_"))
    return EnvRpcError(
        f"env.{kind}",
        0,
        f"environment error: [{label}] {message}",
        code=int(code),
        recoverable=code == env_pb.EnvErrorCode.INVALID_ACTION,
        env_index=lane,
    )


def _env_failed(kind: str, exc: Exception, lane: int | None) -> EnvRpcError:
    text = f"{kind} failed: {type(exc).__name__}: {exc}"
    return _labelled(kind, env_pb.EnvErrorCode.INTERNAL, text, lane)


def _discrete_check(space: gym.spaces.Discrete) -> Callable[[np.ndarray], Fault]:
    low = int(space.start)
    high = low + int(space.n)

    def check(actions: np.ndarray) -> Fault:
        # Two reductions decide the usual all-valid block; the first row at fault
        # is looked for only when there is one.
        if not actions.size or (actions.min() >= low and actions.max() < high):
            return None
        bad = np.flatnonzero((actions < low) | (actions >= high))
        if not bad.size:
            return None
        row = int(bad[0])
        return row, f"$: value {int(actions[row])} not in range [{low}, {high})"

    return check


def _box_check(space: gym.spaces.Box, policy: str) -> Callable[[np.ndarray], Fault]:
    floating = space.dtype is not None and np.issubdtype(space.dtype, np.floating)
    strict = policy == "strict"
    low, high = space.low, space.high

    def check(actions: np.ndarray) -> Fault:
        if floating:
            rows = np.isnan(actions.reshape(len(actions), -1))
            if rows.any():
                row, element = (int(i) for i in np.argwhere(rows)[0])
                return row, f"$: Box value at element {element} is NaN"
        if strict:
            outside = ((actions > high) | (actions < low)).reshape(len(actions), -1).any(axis=1)
            if outside.any():
                row = int(np.flatnonzero(outside)[0])
                return row, conformance_issues(space, actions[row])[0][1]
        return None

    return check


def _action_check(space: gym.Space[Any], policy: str) -> Callable[[np.ndarray], Fault] | None:
    if isinstance(space, gym.spaces.Discrete):
        return _discrete_check(space)
    if isinstance(space, gym.spaces.Box):
        return _box_check(space, policy)
    return None


def same_space(a: gym.Space[Any], b: gym.Space[Any]) -> bool:
    """Whether two block spaces are exactly alike: a Box's shape, dtype and bounds bit for
    bit, a Discrete's ``n`` and ``start`` (gymnasium's ``==`` compares Box bounds with
    ``allclose``: many times the cost, for every route that joins a fused block)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, gym.spaces.Box) and isinstance(b, gym.spaces.Box):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and a.low.tobytes() == b.low.tobytes()
            and a.high.tobytes() == b.high.tobytes()
        )
    if isinstance(a, gym.spaces.Discrete) and isinstance(b, gym.spaces.Discrete):
        return bool(a.n == b.n and a.start == b.start)
    return bool(a == b)


def _filler(space: gym.Space[Any], n: int) -> np.ndarray:
    """``n`` valid actions (Discrete: ``start``; Box: 0 clipped into the bounds)."""
    if isinstance(space, gym.spaces.Discrete):
        return np.full(n, int(space.start), dtype=np.int64)
    assert isinstance(space, gym.spaces.Box)
    one = np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    return np.broadcast_to(one, (n, *space.shape)).copy()


class EnvBlock:
    """The block of a list of envs (``envs``) or of a DISABLED ``VectorEnv`` (``vector``)."""

    def __init__(
        self,
        envs: Sequence[Any] | None,
        vector: Any,
        action_space: gym.Space[Any],
        observation_space: gym.Space[Any],
        conformance: Conformance,
    ) -> None:
        self._envs = list(envs) if envs is not None else None
        self._vector = vector
        self._conformance = conformance
        self.num_lanes = len(self._envs) if self._envs is not None else int(vector.num_envs)
        self._obs_space = observation_space
        self._obs_shape = tuple(observation_space.shape or ())
        self._obs_dtype = observation_space.dtype
        self._action_space = action_space
        self._action_shape = tuple(action_space.shape or ())
        self._action_dtype = action_space.dtype
        check = _action_check(action_space, conformance.policy)
        assert check is not None  # block_of builds blocks only for checkable spaces
        self._check = check
        if vector is not None:
            self._done = np.zeros(self.num_lanes, dtype=bool)
            self._last = _filler(action_space, self.num_lanes)

    @property
    def envs(self) -> list[Any] | None:
        """The single envs of a list block (None for a ``VectorEnv`` block)."""
        return self._envs

    def fuses_with(self, other: EnvBlock) -> bool:
        """Whether ``other``'s envs may be driven in one block with this one's: the same
        action checks and exactly the same spaces (see :func:`same_space`)."""
        return (
            self._conformance.policy == other._conformance.policy
            and same_space(self._action_space, other._action_space)
            and same_space(self._obs_space, other._obs_space)
        )

    def fused(self, envs: Sequence[Any]) -> EnvBlock:
        """A block of ``envs`` (single envs) with this block's spaces and checks."""
        return EnvBlock(envs, None, self._action_space, self._obs_space, self._conformance)

    # ------------------------------------------------------------------ common

    def _observations(self, kind: str, value: Any, rows: int) -> np.ndarray:
        """Stacked observation rows in the space's dtype.

        Raises:
            EnvRpcError: INTERNAL when they do not fit the observation space.
        """
        try:
            out = np.asarray(value, dtype=self._obs_dtype)
        except (TypeError, ValueError) as exc:
            raise _env_failed(kind, exc, None) from exc
        if out.shape != (rows, *self._obs_shape):
            detail = f"got shape {out.shape[1:]}, expected {self._obs_shape}"
            text = f"{kind} failed: observation does not match the observation space: {detail}"
            raise _labelled(kind, env_pb.EnvErrorCode.INTERNAL, text, None)
        return out

    def _checked(self, lanes: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``actions`` in the space's shape and dtype, every row valid.

        Raises:
            EnvRpcError: INVALID_ACTION naming the first lane at fault.
        """
        rows = len(lanes)
        if actions.shape != (rows, *self._action_shape):
            text = f"length mismatch: got actions of shape {actions.shape}, expected {rows} rows"
            raise _labelled("step", env_pb.EnvErrorCode.INVALID_ACTION, text, None)
        fault = self._check(actions)
        if fault is not None:
            row, text = fault
            code = env_pb.EnvErrorCode.INVALID_ACTION
            raise _labelled("step", code, text, int(lanes[row]))
        if actions.dtype != self._action_dtype:
            actions = actions.astype(self._action_dtype)
        return actions

    # ------------------------------------------------------------------ reset

    def reset(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
    ) -> BlockReset:
        """Reset ``lanes`` with their seeds and options (row aligned).

        Raises:
            EnvRpcError: a lane's reset raised (INTERNAL, ``env_index`` set).
        """
        if self._envs is not None:
            rows, infos = [], []
            for lane, seed, opts in zip(lanes.tolist(), seeds, options, strict=True):
                env = self._envs[lane]
                try:
                    obs, info = normalize_reset(
                        reset_env(env, seed, dict(opts) if opts else None), env.observation_space
                    )
                except Exception as exc:
                    raise _env_failed("reset", exc, lane) from exc
                rows.append(obs)
                infos.append(info)
            return BlockReset(self._observations("reset", rows, len(rows)), infos)
        return self._reset_vector(lanes, seeds, options)

    def _reset_vector(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
    ) -> BlockReset:
        """Masked resets (``options["reset_mask"]``), one per distinct options value,
        so each lane gets its own seed and its own reset options."""
        n = self.num_lanes
        out: np.ndarray | None = None
        infos: list[Mapping[str, Any]] = [{}] * len(lanes)
        groups: dict[str, list[int]] = {}
        for row, opts in enumerate(options):
            groups.setdefault(repr(sorted(opts.items())) if opts else "", []).append(row)
        for rows in groups.values():
            mask = np.zeros(n, dtype=bool)
            seed_list: list[int | None] = [None] * n
            for row in rows:
                mask[lanes[row]] = True
                seed_list[int(lanes[row])] = seeds[row]
            opts = dict(options[rows[0]] or {})
            opts["reset_mask"] = mask
            try:
                obs, info = self._vector.reset(seed=seed_list, options=opts)
            except Exception as exc:
                raise _env_failed("reset", exc, None) from exc
            stacked = self._observations("reset", obs, n)
            if out is None:
                out = np.empty((len(lanes), *self._obs_shape), dtype=stacked.dtype)
            picked = lanes[rows]
            out[rows] = stacked[picked]
            for row, lane in zip(rows, picked.tolist(), strict=True):
                infos[row] = lane_info(info, lane)
        self._done[lanes] = False
        assert out is not None
        return BlockReset(out, infos)

    # ------------------------------------------------------------------ step

    def step(self, lanes: np.ndarray, actions: np.ndarray) -> BlockStep:
        """Step ``lanes`` with their ``actions`` rows.

        Raises:
            EnvRpcError: INVALID_ACTION for an action at fault, INTERNAL for an env
                that raised (both naming the lane when one is known).
        """
        actions = self._checked(lanes, actions)
        if self._envs is None:
            return self._step_vector(lanes, actions)
        k = len(lanes)
        obs_rows: list[Any] = [None] * k
        rewards = np.empty(k, dtype=np.float64)
        terminated = np.empty(k, dtype=bool)
        truncated = np.empty(k, dtype=bool)
        final: dict[int, Mapping[str, Any]] = {}
        envs = self._envs
        # Each env gets its row of the action array, in the space's dtype (a Discrete
        # action as a numpy integer scalar): what gymnasium's own vector envs and
        # ``Discrete.sample()`` hand it. ``Discrete.contains``, which many envs assert
        # on every step, takes a numpy integer faster than a Python int.
        for row, lane in enumerate(lanes.tolist()):
            try:
                result = envs[lane].step(actions[row])
                if len(result) != 5:
                    result = normalize_step(result)  # a legacy gym 4-tuple
                obs, reward, term, trunc, info = result
                rewards[row] = reward
            except Exception as exc:
                raise _env_failed("step", exc, lane) from exc
            obs_rows[row] = obs
            terminated[row] = term
            truncated[row] = trunc
            if term or trunc:
                final[lane] = info
        observations = self._observations("step", obs_rows, k)
        return BlockStep(observations, rewards, terminated, truncated, final)

    def _step_vector(self, lanes: np.ndarray, actions: np.ndarray) -> BlockStep:
        """One whole-width step; idle lanes repeat their last action (see the module doc)."""
        vector, n = self._vector, self.num_lanes
        idle = np.ones(n, dtype=bool)
        idle[lanes] = False
        stale = idle & self._done
        if stale.any():
            try:
                vector.reset(seed=[None] * n, options={"reset_mask": stale})
            except Exception as exc:
                raise _env_failed("reset", exc, None) from exc
        full = self._last
        full[lanes] = actions
        try:
            obs, rewards, terminated, truncated, info = vector.step(full)
        except Exception as exc:
            raise _env_failed("step", exc, None) from exc
        terminated = np.asarray(terminated, dtype=bool).reshape(-1)
        truncated = np.asarray(truncated, dtype=bool).reshape(-1)
        self._done = terminated | truncated
        ended = self._done[lanes]
        final: dict[int, Mapping[str, Any]] = {}
        if ended.any():
            for lane in lanes[ended].tolist():
                final[lane] = lane_info(info, lane)
        return BlockStep(
            self._observations("step", obs, n)[lanes],
            np.asarray(rewards, dtype=np.float64).reshape(-1)[lanes],
            terminated[lanes],
            truncated[lanes],
            final,
        )


def block_of(host: EnvHost) -> EnvBlock | None:
    """The lane block of ``host``, or None when it has none (see the module doc)."""
    if isinstance(host, LaneHost):
        envs: Sequence[Any] | None = host._lanes
        vector = None
        action_space, obs_space = host._action_space, host._observation_space
    elif isinstance(host, VectorHost) and isinstance(host._env, gym.vector.VectorEnv):
        if autoreset_mode_of(host._env) != AutoresetMode.DISABLED:
            return None
        envs, vector = None, host._env
        action_space, obs_space = host._action_space, host._observation_space
    else:
        return None
    if not isinstance(obs_space, gym.spaces.Box | gym.spaces.Discrete):
        return None
    conformance = host._conformance
    if _action_check(action_space, conformance.policy) is None:
        return None
    return EnvBlock(envs, vector, action_space, obs_space, conformance)
