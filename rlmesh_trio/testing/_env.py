"""ScriptedEnv: an in-memory ``RuntimeEnv`` whose episodes follow a script."""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence

from .._endpoints import EndpointInfo, Reply
from .._errors import EnvRpcError
from .._protocol import CAP_SUBSET_STEP, WORKFLOW_EDITION, core_pb, env_pb, spaces_pb
from ._observe import ObservationFn, SpaceObservations
from ._script import enter_call

__all__ = ["ScriptedEnv", "scripted_contract"]

_MODES = {
    "unspecified": core_pb.AutoresetMode.UNSPECIFIED,
    "next_step": core_pb.AutoresetMode.NEXT_STEP,
    "same_step": core_pb.AutoresetMode.SAME_STEP,
    "disabled": core_pb.AutoresetMode.DISABLED,
}
_OBS = struct.Struct("<2f")


def scripted_contract(
    num_envs: int = 1,
    autoreset: core_pb.AutoresetMode | int = core_pb.AutoresetMode.DISABLED,
    env_name: str = "Scripted-v0",
) -> core_pb.EnvContract:
    """The fakes' contract: observations ``Box(-inf, inf, (2,), float32)``, actions ``Discrete(2)``.

    Observation of a lane: ``[env_index, step_in_episode]``; actions are INT64.
    """
    spec = core_pb.EnvSpec(
        id=env_name,
        action_space=spaces_pb.SpaceSpec(
            shape=[],
            dtype=spaces_pb.DataType.INT64,
            discrete=spaces_pb.DiscreteSpec(n=2, start=0),
        ),
        observation_space=spaces_pb.SpaceSpec(
            shape=[2], dtype=spaces_pb.DataType.FLOAT32, box=spaces_pb.BoxSpec(unbounded=True)
        ),
        metadata=spaces_pb.MetaMap(),
    )
    mode = core_pb.AutoresetMode(int(autoreset))
    return core_pb.EnvContract(spec=spec, num_envs=num_envs, autoreset_mode=mode)


def _meta_value(value: object) -> spaces_pb.MetaValue:
    if isinstance(value, bool):
        return spaces_pb.MetaValue(bool=value)
    if isinstance(value, int):
        return spaces_pb.MetaValue(integer=value)
    if isinstance(value, float):
        return spaces_pb.MetaValue(number=value)
    return spaces_pb.MetaValue(text=str(value))


def _default_observation_space() -> bytes:
    spec = scripted_contract().spec
    assert spec is not None and spec.observation_space is not None
    return bytes(spec.observation_space)


_DEFAULT_OBSERVATION_SPACE = _default_observation_space()


def _final_info(values: Mapping[str, bool | int | float | str] | None) -> spaces_pb.MetaMap | None:
    if not values:
        return None
    return spaces_pb.MetaMap(entries={k: _meta_value(v) for k, v in values.items()})


def _observations_for(
    contract: core_pb.EnvContract, num_envs: int, fn: ObservationFn | None
) -> SpaceObservations | None:
    """Contract-shaped observations, or None for the 2-float default (see ScriptedEnv)."""
    spec = contract.spec.observation_space if contract.spec is not None else None
    if spec is None:
        if fn is not None:
            raise ValueError(
                "ScriptedEnv(observations=...) needs a contract with an observation space"
            )
        return None
    if fn is None and bytes(spec) == _DEFAULT_OBSERVATION_SPACE:
        return None
    return SpaceObservations(spec, num_envs, fn)


class _EnvLane:
    __slots__ = (
        "active",
        "episode_id",
        "length",
        "pending_roll",
        "reward",
        "seed",
        "start_ns",
        "steps",
    )

    def __init__(self) -> None:
        self.active = False
        self.pending_roll = False
        self.episode_id = ""
        self.seed: int | None = None
        self.steps = 0
        self.reward = 0.0
        self.length = 1
        self.start_ns = 0


class ScriptedEnv:
    """A ``RuntimeEnv`` fake that plays a script; for Trio test suites.

    * ``episode_lengths``: steps per episode, an int or a sequence cycled over
      episodes in start order.
    * ``rewards``: reward per step, a float or a sequence indexed by the step
      within the episode (cycled).
    * ``num_envs`` and ``autoreset`` (``"disabled"``, ``"next_step"``,
      ``"unspecified"``, ``"same_step"`` or an ``AutoresetMode``/int);
      ``subset_step`` (default: on for driver-owned resets, like rlmesh's lane
      server; off for NEXT_STEP, like its vector server).
    * ``delays``: seconds to ``trio.sleep`` per operation (``connect``,
      ``configure``, ``reset``, ``step``, ``close``); a zero delay still
      checkpoints, as a real endpoint would.
    * ``fail_at``: ``{operation: n}`` fails the n-th call (1-based) of that
      operation; ``failure`` is ``"error"`` (an ``EnvRpcError``) or ``"hang"``.
    * ``stale_completions``: every completion is accompanied by one with an
      unknown episode id on the same lane (the runtime must drop it).
    * ``final_info``: put into every completion's ``final_info``
      (e.g. ``{"is_success": True}``).
    * ``contract``, ``editions``, ``preferred_edition``: what ``connect``
      reports; ``telemetry`` is returned as every reply's telemetry.
    * ``observations``: ``fn(env_index, step_in_episode, seed) -> value`` for
      each observation, encoded with the contract's observation space. With
      a ``contract`` whose observation space is not the default one and no
      ``fn``, observations are seeded samples of that space (the same seeds
      give the same observations), so the fake stands in for any real env.
      Otherwise a lane observes ``[env_index, step_in_episode]`` (2 floats).

    Everything the runtime sends is recorded: ``calls`` (operation names in
    order), ``resets``, ``steps``, ``configured`` (the pinned edition),
    ``closes`` (timeouts of ``close`` calls) and ``aclosed``.
    """

    def __init__(
        self,
        *,
        episode_lengths: int | Sequence[int] = 5,
        rewards: float | Sequence[float] = 1.0,
        num_envs: int = 1,
        autoreset: str | core_pb.AutoresetMode | int = "disabled",
        subset_step: bool | None = None,
        delays: Mapping[str, float] | None = None,
        fail_at: Mapping[str, int] | None = None,
        failure: str = "error",
        stale_completions: bool = False,
        final_info: Mapping[str, bool | int | float | str] | None = None,
        contract: core_pb.EnvContract | None = None,
        editions: Sequence[str] = (WORKFLOW_EDITION,),
        preferred_edition: str | None = WORKFLOW_EDITION,
        label: str = "scripted-env",
        telemetry: Mapping[str, float] | None = None,
        record: bool = True,
        observations: ObservationFn | None = None,
    ) -> None:
        #: Keep every request and call name (``calls``, ``resets``, ...) for assertions;
        #: ``record=False`` keeps memory flat for long runs and benchmarks.
        self.record = record
        mode = _MODES[autoreset] if isinstance(autoreset, str) else autoreset
        self.contract = contract if contract is not None else scripted_contract(num_envs, mode)
        self.num_envs = self.contract.num_envs or 1
        self.next_step = int(self.contract.autoreset_mode) == core_pb.AutoresetMode.NEXT_STEP
        self.subset_step = (not self.next_step) if subset_step is None else subset_step
        self.lengths = (
            (episode_lengths,) if isinstance(episode_lengths, int) else tuple(episode_lengths)
        )
        self.rewards = (rewards,) if isinstance(rewards, int | float) else tuple(rewards)
        self.delays = dict(delays or {})
        self.fail_at = dict(fail_at or {})
        if failure not in ("error", "hang"):
            raise ValueError(f"failure must be 'error' or 'hang', got {failure!r}")
        self.failure = failure
        self.stale_completions = stale_completions
        self.final_info = _final_info(final_info)
        self.editions = tuple(editions)
        self.preferred_edition = preferred_edition
        self.label = label
        self.telemetry = dict(telemetry or {})
        self.calls: list[str] = []
        self.counts: dict[str, int] = {}
        self.resets: list[env_pb.ResetRequest] = []
        self.steps: list[env_pb.StepRequest] = []
        self.configured: str | None = None
        self.closes: list[float] = []
        self.aclosed = False
        self.episodes_started = 0
        self._lanes = [_EnvLane() for _ in range(self.num_envs)]
        self._observations = _observations_for(self.contract, self.num_envs, observations)
        self._interrupted: list[env_pb.EpisodeMetadata] = []
        self._stale = 0

    # ------------------------------------------------------------------ plumbing

    async def _enter(self, op: str) -> None:
        count, fail = await enter_call(self, op)
        if fail:
            raise EnvRpcError(
                f"env.{op}",
                0,
                f"environment error: [Internal] injected failure at {op} call {count}",
                code=int(env_pb.EnvErrorCode.INTERNAL),
                recoverable=False,
            )

    def _observation(self, indices: Sequence[int]) -> spaces_pb.SpaceValue:
        lanes = self._lanes
        if self._observations is not None:
            return self._observations.encode(indices, [lanes[k].steps for k in indices])
        return spaces_pb.SpaceValue(
            leaves=[b"".join(_OBS.pack(float(k), float(lanes[k].steps)) for k in indices)]
        )

    def _begin(self, lane: _EnvLane, episode_id: str, seed: int | None) -> None:
        lane.active = True
        lane.pending_roll = False
        lane.episode_id = episode_id
        lane.seed = seed
        lane.steps = 0
        lane.reward = 0.0
        lane.length = self.lengths[self.episodes_started % len(self.lengths)]
        lane.start_ns = time.time_ns()
        if self._observations is not None:
            self._observations.begin(self._lanes.index(lane), seed, self.episodes_started)
        self.episodes_started += 1

    def _metadata(
        self, lane: _EnvLane, k: int, terminated: bool, final: bool
    ) -> env_pb.EpisodeMetadata:
        return env_pb.EpisodeMetadata(
            episode_id=lane.episode_id,
            seed=lane.seed,
            env_index=k,
            step_count=lane.steps,
            cumulative_reward=lane.reward,
            terminated=terminated,
            truncated=not terminated,
            start_timestamp_ns=lane.start_ns,
            end_timestamp_ns=time.time_ns(),
            final_info=self.final_info if final else None,
        )

    # ------------------------------------------------------------------ RuntimeEnv

    async def connect(self) -> EndpointInfo:
        await self._enter("connect")
        return EndpointInfo(
            label=self.label,
            editions=self.editions,
            preferred_edition=self.preferred_edition,
            capabilities={CAP_SUBSET_STEP: "true"} if self.subset_step else {},
            contract=self.contract,
        )

    async def configure(self, edition: str) -> None:
        await self._enter("configure")
        self.configured = edition

    async def reset(self, request: env_pb.ResetRequest) -> Reply[env_pb.ResetResponse]:
        await self._enter("reset")
        if self.record:
            self.resets.append(request)
        indices = list(request.env_indices) or list(range(self.num_envs))
        seeds, ids = request.seeds, request.episode_ids
        for pos, k in enumerate(indices):
            lane = self._lanes[k]
            if lane.active:
                # Reset over a running episode: it becomes an interrupted one (§3.2).
                self._interrupted.append(self._metadata(lane, k, terminated=False, final=False))
            seed = seeds[pos] if pos < len(seeds) else None
            self._begin(lane, ids[pos] if pos < len(ids) else "", seed)
        return Reply(
            env_pb.ResetResponse(observation=self._observation(indices), infos=spaces_pb.MetaMap()),
            self.telemetry,
        )

    async def step(self, request: env_pb.StepRequest) -> Reply[env_pb.StepResponse]:
        await self._enter("step")
        if self.record:
            self.steps.append(request)
        indices = list(request.env_indices) or list(range(self.num_envs))
        ids = request.episode_ids
        rewards: list[float] = []
        terminated = bytearray()
        completed = self._interrupted
        self._interrupted = []
        for pos, k in enumerate(indices):
            lane = self._lanes[k]
            if lane.pending_roll:
                # NEXT_STEP roll: the lane restarts under the pushed id; reward 0, not done.
                self._begin(lane, ids[pos] if pos < len(ids) else "", None)
                rewards.append(0.0)
                terminated.append(0)
                continue
            if not lane.active:
                rewards.append(0.0)
                terminated.append(1)
                continue
            reward = self.rewards[lane.steps % len(self.rewards)]
            lane.steps += 1
            lane.reward += reward
            rewards.append(reward)
            done = lane.steps >= lane.length
            terminated.append(1 if done else 0)
            if done:
                lane.active = False
                lane.pending_roll = self.next_step
                completed.append(self._metadata(lane, k, terminated=True, final=True))
                if self.stale_completions:
                    self._stale += 1
                    stale = self._metadata(lane, k, terminated=True, final=False)
                    stale.episode_id = f"stale-{self._stale}"
                    completed.append(stale)
        response = env_pb.StepResponse(
            observation=self._observation(indices),
            rewards=rewards,
            terminated_mask=bytes(terminated),
            truncated_mask=bytes(len(indices)),
            infos=spaces_pb.MetaMap(),
            completed_episodes=completed,
            env_indices=list(request.env_indices),
        )
        return Reply(response, self.telemetry)

    async def close(self, timeout: float) -> list[env_pb.EpisodeMetadata]:
        self.closes.append(timeout)
        await self._enter("close")
        final = self._interrupted
        self._interrupted = []
        for k, lane in enumerate(self._lanes):
            if lane.active:
                final.append(self._metadata(lane, k, terminated=False, final=False))
                lane.active = False
        return final

    async def aclose(self) -> None:
        self.aclosed = True
