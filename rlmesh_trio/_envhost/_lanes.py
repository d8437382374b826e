"""The lane flavour: one gymnasium env, or a list of them served as lanes (``subset_step``).

Each lane is a separate single env. A request may name lanes with
``env_indices``: one per request in 0.1.0 runtimes; several (a lane block,
answered in the order named) from clients that read ``CAP_MULTI_LANE_SUBSET``,
which this host advertises beside ``subset_step``. Lanes of different requests
run concurrently, each in its own worker thread. With no ``env_indices`` a
request covers every lane. The checks of a several-lane request are planned
once (``_lane_block``); the errors of a subset naming several lanes start with
``env_index K: `` (the lane at fault); other requests keep 0.1.0's messages.
Autoreset is DISABLED: the runtime resets a finished lane itself (protocol
notes §4.2, §4.5).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import betterproto2
import gymnasium as gym

from .. import spaces
from .._errors import ProtocolError
from .._protocol import CAP_MULTI_LANE_SUBSET, CAP_SUBSET_STEP, core_pb, env_pb, spaces_pb
from .._wire._step_parts import StepParts
from ._conformance import Conformance, with_warnings
from ._contract import build_contract, env_id_of
from ._host import Call, EnvFailure, EnvHost, invalid_action, unsupported
from ._lane_block import LaneChecks, action_failure, lanes_infos, run_lanes
from ._legacy import normalize_reset, normalize_step, reset_env
from ._one_lane import OneLanePlan
from ._values import info_map, options_of, render_response

__all__ = ["LaneHost"]

#: One lane's step result: (observation, reward, terminated, truncated, info).
_LaneStep = tuple[Any, float, bool, bool, Any]


def _reset_lane(env: Any, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, Any]:
    # The legacy gym API too (a bare observation; a reset without seed/options keywords).
    return normalize_reset(reset_env(env, seed, options), env.observation_space)


def _step_lane(env: Any, action: Any) -> _LaneStep:
    result = env.step(action)
    if len(result) != 5:
        result = normalize_step(result)  # a legacy gym 4-tuple
    obs, reward, terminated, truncated, info = result
    return obs, float(reward), bool(terminated), bool(truncated), info


class LaneHost(EnvHost):
    """Serves N single envs as the N lanes of one endpoint (N=1 for a plain env)."""

    def __init__(
        self,
        lanes: Sequence[Any],
        *,
        close_envs: bool = False,
        validation: str | None = None,
    ) -> None:
        if not lanes:
            raise ValueError("a lane endpoint needs at least one env")
        self._lanes = list(lanes)
        self._conformance = Conformance(validation)
        first = self._lanes[0]
        self._action_space: gym.Space[Any] = first.action_space
        self._observation_space: gym.Space[Any] = first.observation_space
        contract = build_contract(
            env_id=env_id_of(first),
            action_space=self._action_space,
            observation_space=self._observation_space,
            metadata=getattr(first, "metadata", None),
            num_envs=len(self._lanes),
            render_mode=getattr(first, "render_mode", None),
            autoreset=core_pb.AutoresetMode.DISABLED,
        )
        assert contract.spec is not None
        assert contract.spec.action_space is not None
        assert contract.spec.observation_space is not None
        self._action_spec: spaces_pb.SpaceSpec = contract.spec.action_space
        self._observation_spec: spaces_pb.SpaceSpec = contract.spec.observation_space
        # The same object listed twice is one env: its lanes must never run at once.
        by_object: dict[int, set[int]] = {}
        for lane, env in enumerate(self._lanes):
            by_object.setdefault(id(env), set()).add(lane)
        self._groups = [frozenset(by_object[id(env)]) for env in self._lanes]
        unique = list({id(env): env for env in self._lanes}.values())
        self._concurrent = len(unique) > 1
        # The message path's checks, made at its first reset or step (as the one-lane plan
        # below): lanes a fused block drives never take the message path.
        self._lane_checks: LaneChecks | None = None
        # A single env: its step's checks are planned once (the common in-process case),
        # at its first step: one a fused block steps (``rt.shard`` over many envs) never
        # needs it, and planning it for each of many routes is setup time.
        self._single = len(self._lanes) == 1
        self._one_plan: OneLanePlan | None = None
        super().__init__(
            contract=contract,
            capabilities={CAP_SUBSET_STEP: "true", CAP_MULTI_LANE_SUBSET: "true"},
            closers=[env.close for env in unique] if close_envs else [],
        )

    # -- ordering ------------------------------------------------------------------------

    @property
    def concurrent(self) -> bool:
        return self._concurrent

    def _lanes_of(self, request: env_pb.JoinRequest) -> Iterable[int] | None:
        kind, arm = betterproto2.which_one_of(request, "kind")
        body: Any = arm
        if kind in ("reset", "step"):
            chosen = list(body.env_indices)
        elif kind == "render":
            chosen = list(body.env_indices) or [0]
        else:
            return None
        if not chosen or any(i >= self.num_envs for i in chosen):
            return None  # whole width, or invalid (answered in order)
        touched: set[int] = set()
        for lane in chosen:
            touched |= self._groups[lane]
        return touched

    # -- lane selection ------------------------------------------------------------------

    def _subset(self, what: str, indices: Sequence[int]) -> list[int]:
        n = self.num_envs
        seen: set[int] = set()
        for lane in indices:
            if lane >= n:
                raise invalid_action(f"{what}: env_index {lane} out of range for num_envs {n}")
            if lane in seen:
                raise invalid_action(f"{what}: duplicate env_index {lane}")
            seen.add(lane)
        return list(indices)

    # -- operations ----------------------------------------------------------------------

    def _reset(self, body: env_pb.ResetRequest, call: Call) -> env_pb.ResetResponse:
        seeds_in = list(body.seeds)
        ids_in = list(body.episode_ids)
        if body.env_indices:
            lanes = self._subset("partial reset", body.env_indices)
            count = len(lanes)
            if seeds_in and len(seeds_in) != count:
                raise invalid_action(
                    f"partial reset: seeds length {len(seeds_in)} does not match env_indices "
                    f"length {count} (provide one seed per reset lane, or none)"
                )
            if ids_in and len(ids_in) != count:
                raise invalid_action(
                    f"partial reset: episode_ids length {len(ids_in)} does not match env_indices "
                    f"length {count} (provide one episode id per reset lane, or none)"
                )
        else:
            lanes = list(range(self.num_envs))
        # Whole width: seeds and ids align by position; extra entries are ignored and
        # missing ones leave the lane unseeded / with the empty id (as 0.1.0 does).
        seeds: list[int | None] = [
            seeds_in[k] if k < len(seeds_in) else None for k in range(len(lanes))
        ]
        ids = [ids_in[k] if k < len(ids_in) else "" for k in range(len(lanes))]
        options = options_of(body.options)

        envs = self._lanes
        results = run_lanes(
            call,
            "reset",
            lanes,
            [(envs[k], seed, options) for k, seed in zip(lanes, seeds, strict=True)],
            _reset_lane,
            len(body.env_indices) > 1,
        )
        with call.encoding():
            warned: list[list[dict[str, str]]] = [[] for _ in lanes]
            observation = self._checks.observations(
                "reset", lanes, [obs for obs, _ in results], warned
            )
            infos = [with_warnings(info, w) for (_, info), w in zip(results, warned, strict=True)]
            if len(lanes) == 1:
                info_msg = info_map("reset", infos[0])
            else:
                flags = [True] * len(lanes)
                info_msg = lanes_infos("reset", infos, flags, warned, bool(body.env_indices))
        call.check_deadline()
        for lane, episode_id, seed in zip(lanes, ids, seeds, strict=True):
            self.book.start(lane, episode_id, seed)
        return env_pb.ResetResponse(observation=observation, infos=info_msg)

    @property
    def _checks(self) -> LaneChecks:
        """The message path's per-lane checks (see ``__init__``)."""
        checks = self._lane_checks
        if checks is None:
            checks = self._lane_checks = LaneChecks(
                action_space=self._action_space,
                observation_space=self._observation_space,
                observation_spec=self._observation_spec,
                conformance=self._conformance,
            )
        return checks

    def _one(self) -> OneLanePlan | None:
        """The single env's planned step (None with several lanes); see ``__init__``."""
        one = self._one_plan
        if one is None and self._single:
            one = self._one_plan = OneLanePlan(
                action_space=self._action_space,
                action_spec=self._action_spec,
                observation_space=self._observation_space,
                observation_spec=self._observation_spec,
                conformance=self._conformance,
            )
        return one

    def _step(self, body: env_pb.StepRequest, call: Call) -> env_pb.StepResponse | StepParts:
        one = self._one()
        if one is not None:
            indices = body.env_indices
            if not indices or (len(indices) == 1 and indices[0] == 0):
                return self._step_one(one, body.action, call, bool(indices))
        subset = bool(body.env_indices)
        lanes = (
            self._subset("subset step", body.env_indices) if subset else list(range(self.num_envs))
        )
        count = len(lanes)
        named = subset and count > 1  # errors name the lane at fault (ours only: 0.1.0
        # runtimes never send several lanes in one request)
        if body.action is None:
            raise invalid_action(f"expected {count} actions, got 0")
        with call.decoding():
            try:
                actions = spaces.decode_batch(self._action_spec, body.action, count)
            except ProtocolError as exc:
                raise action_failure(exc, lanes, named) from exc
            warned = self._checks.actions(lanes, actions, named)
        envs = self._lanes
        results = run_lanes(
            call,
            "step",
            lanes,
            [(envs[k], a) for k, a in zip(lanes, actions, strict=True)],
            _step_lane,
            named,
        )
        with call.encoding():
            observation = self._checks.observations("step", lanes, [r[0] for r in results], warned)
            raw_infos = [with_warnings(r[4], w) for r, w in zip(results, warned, strict=True)]
            ended = [r[2] or r[3] for r in results]
            if count == 1:
                info_msg = info_map("step", raw_infos[0])
                finals: list[spaces_pb.MetaMap | None] = [info_msg]
            else:
                info_msg = lanes_infos("step", raw_infos, ended, warned, subset)
                # A lane's own info map is its final info: built for ended lanes only.
                finals = [
                    info_map("step", info) if done else None
                    for info, done in zip(raw_infos, ended, strict=True)
                ]
        call.check_deadline()
        return self._answer_step(lanes, results, finals, observation, info_msg, subset)

    @property
    def one_lane(self) -> bool:
        return self._single

    def step_now(self, action: list[bytes], timeout_ms: int) -> Call | None:
        one = self._one()
        if one is None or not self._sched.idle():
            return None
        call = Call("step", timeout_ms, time.monotonic_ns())
        call.parts = True
        try:
            call.answer = self._step_one(one, action, call, False)
        except EnvFailure as failure:
            call.fail(failure)
        return call

    def _step_one(
        self,
        one: OneLanePlan,
        value: spaces_pb.SpaceValue | list[bytes] | None,
        call: Call,
        subset: bool,
    ) -> env_pb.StepResponse | StepParts:
        """:meth:`_step` of a one-env endpoint (lane 0) for the action frame ``value``
        (a message's, or its leaves): the same answer, planned checks; as
        :class:`StepParts` when the call asks for parts."""
        action, warned = one.decode_action(value, call)
        result = call.env("step", _step_lane, self._lanes[0], action)
        if call.parts:
            leaves, parts_infos = one.encode_parts(result[0], result[4], warned, call)
            call.check_deadline()
            return one.answer_parts(self.book, result, leaves, parts_infos, subset)
        observation, infos = one.encode(result[0], result[4], warned, call)
        call.check_deadline()
        return one.answer(self.book, result, observation, infos, subset)

    def _answer_step(
        self,
        lanes: list[int],
        results: list[_LaneStep],
        finals: list[spaces_pb.MetaMap | None],
        observation: spaces_pb.SpaceValue,
        info_msg: spaces_pb.MetaMap,
        subset: bool,
    ) -> env_pb.StepResponse:
        """Book the step the ``lanes`` took (``results`` in lane order) and build the answer.

        Called once the step is encoded and inside its deadline, so nothing here
        fails. Synchronous, in the request's worker thread: no cancellation point.

        Raises:
            Nothing of its own (the episode book only counts and records).
        """
        completed = self.book.drain_interrupted()
        for lane, (_, reward, terminated, truncated, _), final in zip(
            lanes, results, finals, strict=True
        ):
            record = self.book.step(
                lane, reward, terminated=terminated, truncated=truncated, final_info=final
            )
            if record is not None:
                completed.append(record)
        return env_pb.StepResponse(
            observation=observation,
            rewards=[r[1] for r in results],
            terminated_mask=bytes(int(r[2]) for r in results),
            truncated_mask=bytes(int(r[3]) for r in results),
            infos=info_msg,
            completed_episodes=completed,
            env_indices=lanes if subset else [],
        )

    def _render(self, body: env_pb.RenderRequest, call: Call) -> env_pb.RenderResponse:
        if len(body.env_indices) > 1:
            raise unsupported("render requests support at most one env_index")
        lane = body.env_indices[0] if body.env_indices else 0
        if lane >= self.num_envs:
            raise invalid_action(
                f"render: env_index {lane} out of range for num_envs {self.num_envs}"
            )
        frame = call.env("render", self._lanes[lane].render)
        response = render_response(frame)
        call.check_deadline()
        return response
