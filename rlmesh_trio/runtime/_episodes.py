"""Episode bookkeeping: ids, seeds, trials, results and matching env completions.

Nothing here awaits or talks to an endpoint: :class:`EpisodeBook` decides
which episode a lane runs next and what its result is; the loop emits the
events around those decisions.
"""

from __future__ import annotations

from collections.abc import Callable

from .._protocol import env_pb, spaces_pb
from ..spaces import meta_map_from_python
from ._meta import TRIAL_INDEX_OPTION, episode_success
from ._results import EpisodeRecord, EpisodeResult, record_id
from ._spec import DEFAULT_MAX_EPISODE_STEPS, RouteSpec, mint_uuid7

__all__ = ["EpisodeBook", "Lane", "meta_duration"]


def meta_duration(meta: env_pb.EpisodeMetadata) -> float | None:
    """An env-reported episode's duration (seconds) by its own timestamps; None when it
    sent none (then the runtime's clock times the episode)."""
    start_ns, end_ns = meta.start_timestamp_ns, meta.end_timestamp_ns
    return (end_ns - start_ns) / 1e9 if start_ns > 0 and end_ns >= start_ns else None


class Lane:
    """The runtime's view of one env lane and the episode it is running."""

    __slots__ = (
        "active",
        "env_index",
        "episode_id",
        "predict_ms",
        "record",
        "reward",
        "rolling",
        "seed",
        "started_at",
        "step_ms",
        "steps",
        "trial",
    )

    def __init__(self, env_index: int) -> None:
        self.env_index = env_index
        self.episode_id = ""
        self.record: EpisodeRecord | None = None
        self.seed: int | None = None
        self.steps = 0
        self.reward = 0.0
        self.started_at = 0.0
        self.trial: int | None = None
        # Wall times summed over the episode's steps (means on its result).
        self.predict_ms = 0.0
        self.step_ms = 0.0
        self.active = False
        # NEXT_STEP: a new id was minted for this lane; the next step is its roll step,
        # which counts for neither episode.
        self.rolling = False


class EpisodeBook:
    """The episodes of one route: who runs what, and what finished.

    ``env_owns_resets`` (NEXT_STEP) means seeds, trials and runtime truncation
    do not apply: the env starts its episodes itself.
    """

    def __init__(self, spec: RouteSpec, now: Callable[[], float]) -> None:
        self._spec = spec
        self._now = now
        self.budget = spec.episode_budget
        self.results: list[EpisodeResult] = []
        self.lanes: list[Lane] = []
        self.started = 0
        self.env_owns_resets = False
        self.trial_option = False
        self.max_steps = spec.max_episode_steps or DEFAULT_MAX_EPISODE_STEPS
        self.max_seconds = spec.max_episode_seconds
        self._seed_pos = 0

    def open_lanes(self, num_envs: int, env_owns_resets: bool, trial_option: bool) -> list[Lane]:
        """One lane per env index, for the session's contract."""
        self.env_owns_resets = env_owns_resets
        self.trial_option = trial_option
        self.lanes = [Lane(k) for k in range(num_envs)]
        return self.lanes

    def trial_of(self, index: int) -> int | None:
        """The trial episode ``index`` (start order) walks; ``None`` when the env owns resets."""
        if self.env_owns_resets:
            return None
        return self._spec.trial_for(index)

    def may_start(self) -> bool:
        """Whether the budget leaves room for another episode to start."""
        return self.budget is None or self.started < self.budget

    def budget_spent(self) -> bool:
        """Whether enough episodes have finished to end the route."""
        return self.budget is not None and len(self.results) >= self.budget

    def start(self, lane: Lane, auto: bool) -> None:
        """Mint an id for ``lane``'s next episode and claim its seed (episode start order)."""
        index = self.started
        self.started += 1
        seed: int | None = None
        seeds = self._spec.seeds
        if seeds is not None and not self.env_owns_resets and self._seed_pos < len(seeds):
            seed = seeds[self._seed_pos]
            self._seed_pos += 1
        episode_id = mint_uuid7()
        lane.episode_id = episode_id
        lane.seed = seed
        lane.record = EpisodeRecord(record_id(index), index, episode_id, lane.env_index, seed, auto)
        lane.steps = 0
        lane.reward = 0.0
        lane.predict_ms = lane.step_ms = 0.0
        lane.trial = self.trial_of(index)
        lane.active = True
        lane.rolling = False
        lane.started_at = self._now()

    def reset_options(self, lane: Lane) -> spaces_pb.MetaMap | None:
        """``{"trial_index": ...}`` for an env that declared that reset option, else nothing."""
        if not self.trial_option or lane.trial is None:
            return None
        return meta_map_from_python({TRIAL_INDEX_OPTION: lane.trial})

    def claim(self, meta: env_pb.EpisodeMetadata) -> Lane | None:
        """The active lane an env-reported completion belongs to, or ``None`` if it is stale."""
        k = meta.env_index
        lanes = self.lanes
        lane = lanes[k] if 0 <= k < len(lanes) else None
        if lane is None or not lane.active or lane.episode_id != meta.episode_id:
            return None
        return lane

    def truncation_cap(self, lane: Lane, now: float) -> str | None:
        """The runtime cap ``lane``'s episode has reached (steps or seconds), if any."""
        if lane.steps >= self.max_steps:
            return f"the step cap ({self.max_steps})"
        max_seconds = self.max_seconds
        if max_seconds is not None and now - lane.started_at >= max_seconds:
            return f"the time cap ({max_seconds}s)"
        return None

    def finish(self, lane: Lane, meta: env_pb.EpisodeMetadata | None) -> EpisodeResult:
        """Record the end of ``lane``'s episode: an env completion, or runtime truncation."""
        if meta is None:
            return self.finish_as(lane, terminated=False, truncated=True, success=None)
        duration = meta_duration(meta)
        return self.finish_as(
            lane,
            steps=meta.step_count,
            reward=meta.cumulative_reward,
            terminated=meta.terminated,
            truncated=meta.truncated,
            success=episode_success(meta.final_info),
            duration=duration,
        )

    def finish_as(
        self,
        lane: Lane,
        *,
        terminated: bool,
        truncated: bool,
        success: bool | None,
        duration: float | None = None,
        steps: int | None = None,
        reward: float | None = None,
    ) -> EpisodeResult:
        """Record the end of ``lane``'s episode with these end flags; ``steps``/``reward``
        (default: the lane's own count) and ``duration`` (seconds, default: the
        runtime's wall clock) as the env reported them."""
        record = lane.record
        assert record is not None
        lane.active = False
        lane.rolling = False
        if duration is None:
            duration = self._now() - lane.started_at
        counted = lane.steps
        result = EpisodeResult(
            index=record.index,
            episode_id=record.episode_id,
            env_index=lane.env_index,
            seed=record.seed,
            steps=counted if steps is None else steps,
            reward=lane.reward if reward is None else reward,
            terminated=terminated,
            truncated=truncated,
            success=success,
            duration_s=duration,
            record_id=record.record_id,
            predict_ms=lane.predict_ms / counted if counted else None,
            step_ms=lane.step_ms / counted if counted else None,
            trial=lane.trial,
        )
        self.results.append(result)
        return result
