"""The vector flavour: a gymnasium ``VectorEnv`` with N >= 2 lanes, whole width only.

Requests run strictly in arrival order. Under NEXT_STEP autoreset the env
owns resets after the first: when a lane finishes at step *t*, step *t+1*
(the "roll") returns that lane's first observation with reward 0, and the
host starts tracking the id the runtime pushed for that lane in step *t+1*'s
``episode_ids`` (protocol notes §4.3, §4.4). The roll step counts for neither
episode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import iterate

from .. import spaces
from .._errors import ProtocolError
from .._protocol import core_pb, env_pb, spaces_pb
from ._checks import action_error_text, find_nan
from ._conformance import Conformance, with_warnings
from ._contract import build_contract, env_id_of
from ._host import Call, EnvHost, internal, invalid_action, unsupported
from ._legacy import DuckVector
from ._values import (
    encode_stacked_observations,
    info_map,
    lane_info,
    options_of,
    render_response,
)

__all__ = ["VectorHost", "autoreset_mode_of"]

_WIRE_MODES = {
    AutoresetMode.NEXT_STEP: core_pb.AutoresetMode.NEXT_STEP,
    AutoresetMode.DISABLED: core_pb.AutoresetMode.DISABLED,
}


def autoreset_mode_of(env: gym.vector.VectorEnv[Any, Any, Any] | DuckVector) -> AutoresetMode:
    """The env's declared autoreset mode (gymnasium's default is NEXT_STEP)."""
    mode = (getattr(env, "metadata", None) or {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if isinstance(mode, str):
        mode = AutoresetMode(mode)
    if not isinstance(mode, AutoresetMode):
        raise ValueError(f"unrecognised autoreset_mode {mode!r} in the vector env's metadata")
    return mode


class VectorHost(EnvHost):
    """Serves a gymnasium VectorEnv (NEXT_STEP or DISABLED autoreset)."""

    def __init__(
        self,
        env: gym.vector.VectorEnv[Any, Any, Any] | DuckVector,
        *,
        close_env: bool = False,
        validation: str | None = None,
    ) -> None:
        mode = autoreset_mode_of(env)
        if mode not in _WIRE_MODES:
            raise ValueError(
                "SAME_STEP autoreset is reserved but not yet supported by the runtime; "
                "construct the env with NEXT_STEP or DISABLED autoreset"
            )
        self._env = env
        self._n = int(env.num_envs)
        self._next_step = mode == AutoresetMode.NEXT_STEP
        self._action_space: gym.Space[Any] = env.single_action_space
        self._observation_space: gym.Space[Any] = env.single_observation_space
        self._conformance = Conformance(validation)
        contract = build_contract(
            env_id=env_id_of(env),
            action_space=env.single_action_space,
            observation_space=env.single_observation_space,
            metadata=getattr(env, "metadata", None),
            num_envs=self._n,
            render_mode=getattr(env, "render_mode", None),
            autoreset=_WIRE_MODES[mode],
        )
        assert contract.spec is not None
        assert contract.spec.action_space is not None
        assert contract.spec.observation_space is not None
        self._action_spec: spaces_pb.SpaceSpec = contract.spec.action_space
        self._observation_spec: spaces_pb.SpaceSpec = contract.spec.observation_space
        # Lanes that finished on the previous step and roll (NEXT_STEP) on the next.
        self._rolling: set[int] = set()
        super().__init__(
            contract=contract, capabilities={}, closers=[env.close] if close_env else []
        )

    def _on_session_end(self) -> None:
        self._rolling.clear()

    def _warnings(self, kind: str, stacked: Any) -> list[dict[str, str]]:
        if self._conformance.policy == "off":
            return []
        batched = self._env.action_space if kind == "action" else self._env.observation_space
        single = self._action_space if kind == "action" else self._observation_space
        found: list[dict[str, str]] = []
        for value in iterate(batched, stacked):
            # One report per (kind, path) for the whole vector, as 0.1.0's vector server does.
            found += self._conformance.check(0, kind, single, value)
        return found

    def _reset(self, body: env_pb.ResetRequest, call: Call) -> env_pb.ResetResponse:
        if body.env_indices:
            raise unsupported(
                "partial reset (ResetRequest.env_indices) is not supported by this environment"
            )
        seeds_in = list(body.seeds)
        seed: int | list[int] | None
        recorded: list[int | None]
        if not seeds_in:
            seed, recorded = None, [None] * self._n
        elif len(seeds_in) == 1:
            # gymnasium seeds lanes s, s+1, ...; only lane 0 was explicitly seeded.
            seed, recorded = seeds_in[0], [seeds_in[0]] + [None] * (self._n - 1)
        else:
            # A count other than N makes gymnasium raise: INTERNAL, as in 0.1.0.
            seed = seeds_in
            recorded = [seeds_in[k] if k < len(seeds_in) else None for k in range(self._n)]
        ids_in = list(body.episode_ids)
        ids = [ids_in[k] if k < len(ids_in) else "" for k in range(self._n)]

        obs, info = call.env("reset", self._env.reset, seed=seed, options=options_of(body.options))
        with call.encoding():
            observation = encode_stacked_observations("reset", self._observation_spec, obs, self._n)
            infos = info_map("reset", with_warnings(info, self._warnings("observation", obs)))
        call.check_deadline()
        for lane in range(self._n):
            self.book.start(lane, ids[lane], recorded[lane])
        self._rolling.clear()
        return env_pb.ResetResponse(observation=observation, infos=infos)

    def _step(self, body: env_pb.StepRequest, call: Call) -> env_pb.StepResponse:
        if body.env_indices:
            raise unsupported(
                "subset stepping (StepRequest.env_indices) is not supported by this environment"
            )
        n = self._n
        if body.action is None:
            raise invalid_action(f"expected {n} actions, got 0")
        with call.decoding():
            try:
                actions = spaces.decode_stacked(self._action_spec, body.action, n)
            except ProtocolError as exc:
                raise invalid_action(action_error_text(exc)) from exc
            nan = find_nan(self._action_space, actions, lanes=n)
            if nan:
                raise invalid_action(nan)
            warned = self._warnings("action", actions)

        obs, rewards, terminated, truncated, info = call.env("step", self._env.step, actions)
        rewards = [float(r) for r in np.asarray(rewards).reshape(-1)]
        term = [bool(t) for t in np.asarray(terminated).reshape(-1)]
        trunc = [bool(t) for t in np.asarray(truncated).reshape(-1)]
        if not len(rewards) == len(term) == len(trunc) == n:
            raise internal(
                f"step failed: the vector env returned {len(rewards)} rewards, {len(term)} "
                f"terminated and {len(trunc)} truncated flags for {n} lanes"
            )
        with call.encoding():
            observation = encode_stacked_observations("step", self._observation_spec, obs, n)
            warned += self._warnings("observation", obs)
            infos = info_map("step", with_warnings(info, warned))
        if self._rolling:  # the check costs nothing on the steps without a roll
            self._check_rolls(rewards, term, trunc)
        call.check_deadline()
        completed = self._book_step(body, n, rewards, term, trunc, info)
        return env_pb.StepResponse(
            observation=observation,
            rewards=rewards,
            terminated_mask=bytes(int(t) for t in term),
            truncated_mask=bytes(int(t) for t in trunc),
            infos=infos,
            completed_episodes=completed,
        )

    def _check_rolls(self, rewards: list[float], term: list[bool], trunc: list[bool]) -> None:
        """Every rolling lane came back as NEXT_STEP promises: reward 0, not done.

        Raises:
            EnvFailure: INTERNAL naming the first lane that broke the contract.
        """
        for lane in self._rolling:
            if term[lane] or trunc[lane] or rewards[lane] != 0.0:
                raise internal(
                    f"step failed: NEXT_STEP autoreset contract violated: lane {lane} should "
                    "have returned its reset observation with reward 0 and not done, got "
                    f"reward {rewards[lane]}, terminated {term[lane]}, truncated {trunc[lane]}"
                )

    def _book_step(
        self,
        body: env_pb.StepRequest,
        n: int,
        rewards: list[float],
        term: list[bool],
        trunc: list[bool],
        info: Any,
    ) -> list[env_pb.EpisodeMetadata]:
        """Book one whole-width step on every lane; the episodes it completed (interrupted first).

        Rolling lanes start their new episode; lanes that finished now roll on
        the next step (NEXT_STEP only). Synchronous: no cancellation point.

        Raises:
            EnvFailure: INTERNAL when a finished lane's info does not encode.
        """
        completed = self.book.drain_interrupted()
        ids_in = list(body.episode_ids)
        finished: set[int] = set()
        for lane in range(n):
            if lane in self._rolling:
                # The roll: a new episode under the id pushed for this lane now, unseeded.
                self.book.start(lane, ids_in[lane] if lane < len(ids_in) else "", None)
                continue
            done = term[lane] or trunc[lane]
            final = None
            if done and isinstance(info, dict):
                sliced = lane_info(info, lane)
                final = info_map("step", sliced) if sliced else None
            record = self.book.step(
                lane, rewards[lane], terminated=term[lane], truncated=trunc[lane], final_info=final
            )
            if record is not None:
                completed.append(record)
            if done:
                finished.add(lane)
        self._rolling = finished if self._next_step else set()
        return completed

    def _render(self, body: env_pb.RenderRequest, call: Call) -> env_pb.RenderResponse:
        if len(body.env_indices) > 1:
            raise unsupported("render requests support at most one env_index")
        lane = body.env_indices[0] if body.env_indices else 0
        if lane >= self._n:
            raise invalid_action(f"render: env_index {lane} out of range for num_envs {self._n}")
        frames: Any = call.env("render", self._env.render)
        if isinstance(frames, tuple | list) and not isinstance(frames, str):
            frame = frames[lane] if lane < len(frames) else None
        else:
            frame = frames
        response = render_response(frame)
        call.check_deadline()
        return response
