"""Observations for :class:`~rlmesh_trio.testing.ScriptedEnv` that fit its contract's space."""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium

from .. import spaces
from .._protocol import spaces_pb

__all__ = ["ObservationFn", "SpaceObservations"]

#: ``fn(env_index, step_in_episode, seed) -> observation`` (one lane's unbatched value).
ObservationFn = Callable[[int, int, "int | None"], Any]


class SpaceObservations:
    """Per-lane observation streams for an observation ``SpaceSpec``.

    Without ``fn``, each episode's observations are samples of the gymnasium
    space the spec describes, drawn from a copy of it seeded by the episode's
    seed (or, unseeded, by its start order): the same script gives the same
    observations on every run. With ``fn``, ``fn(env_index, step, seed)``
    gives each one. Either way the values are encoded with the spec, so they
    always fit the contract. Raises :class:`~rlmesh_trio.ProtocolError` for a
    spec that does not describe a space.
    """

    def __init__(self, spec: spaces_pb.SpaceSpec, num_envs: int, fn: ObservationFn | None) -> None:
        self.spec = spec
        self._fn = fn
        self._space: gymnasium.Space[Any] = spaces.to_gymnasium(spec)
        self._streams: list[gymnasium.Space[Any] | None] = [None] * num_envs
        self._seeds: list[int | None] = [None] * num_envs

    def begin(self, lane: int, seed: int | None, episode_number: int) -> None:
        """Lane ``lane`` starts its episode (``episode_number``: start order on the env)."""
        self._seeds[lane] = seed
        if self._fn is None:
            stream = copy.deepcopy(self._space)
            key = seed if seed is not None else zlib.crc32(f"episode:{episode_number}".encode())
            stream.seed(key)
            self._streams[lane] = stream

    def encode(self, lanes: Sequence[int], steps: Sequence[int]) -> spaces_pb.SpaceValue:
        """The next observation of each of ``lanes`` (at ``steps`` within their episodes)."""
        values = [self._value(lane, step) for lane, step in zip(lanes, steps, strict=True)]
        return spaces.encode_batch(self.spec, values)

    def _value(self, lane: int, step: int) -> Any:
        if self._fn is not None:
            return self._fn(lane, step, self._seeds[lane])
        stream = self._streams[lane]
        if stream is None:  # observed before any reset (a step on an idle lane)
            self.begin(lane, None, -1 - lane)
            stream = self._streams[lane]
            assert stream is not None
        return stream.sample()
