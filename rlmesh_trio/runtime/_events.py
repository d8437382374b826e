"""Hook events: frozen value objects, each carrying the route it came from.

Every event has ``route`` (a :class:`RouteContext`) and the shortcuts
``session_id``, ``route_id`` and ``env_id``. Payload values are the wire
messages themselves (``SpaceValue``, ``SpaceSpec``, ``MetaMap``): decode them
with ``rlmesh_trio.spaces`` when a hook needs Python values.
"""

from __future__ import annotations

import attrs

from .._protocol import spaces_pb
from ._results import EpisodeResult, TelemetryRow

__all__ = [
    "ActionReceivedEvent",
    "EpisodeCompletedEvent",
    "EpisodeStartedEvent",
    "LogEvent",
    "ObservationEmittedEvent",
    "RouteContext",
    "SessionEndedEvent",
    "SessionFailedEvent",
    "SessionStartedEvent",
    "StepCompletedEvent",
    "TelemetrySummaryEvent",
    "TelemetryWindowEvent",
]


@attrs.frozen(slots=True)
class RouteContext:
    """Who an event is about: the session, the route and its env/model components."""

    session_id: str
    route_id: str
    env_id: str
    env_component_id: str
    model_component_id: str


@attrs.frozen(slots=True)
class _RouteEvent:
    route: RouteContext

    @property
    def session_id(self) -> str:
        return self.route.session_id

    @property
    def route_id(self) -> str:
        return self.route.route_id

    @property
    def env_id(self) -> str:
        return self.route.env_id


@attrs.frozen(slots=True)
class SessionStartedEvent(_RouteEvent):
    """The route is about to connect to its endpoints."""


@attrs.frozen(slots=True)
class EpisodeStartedEvent(_RouteEvent):
    episode_id: str
    episode_record_id: str
    episode_index: int
    env_index: int
    seed: int | None
    started_from_auto_reset: bool


@attrs.frozen(slots=True)
class EpisodeCompletedEvent(_RouteEvent):
    """An episode of ours finished (env completion or runtime truncation).

    ``final_info`` is the env's completion ``final_info`` (``None`` when the
    env sent none or the runtime truncated the episode).
    """

    episode_id: str
    episode_record_id: str
    episode_index: int
    env_index: int
    step_count: int
    cumulative_reward: float
    terminated: bool
    truncated: bool
    duration_ms: float
    final_info: spaces_pb.MetaMap | None
    result: EpisodeResult

    @classmethod
    def of(
        cls, ctx: RouteContext, result: EpisodeResult, final_info: spaces_pb.MetaMap | None
    ) -> EpisodeCompletedEvent:
        """The event of a finished episode's ``result`` (the one place its fields are read)."""
        return cls(
            ctx,
            episode_id=result.episode_id,
            episode_record_id=result.record_id,
            episode_index=result.index,
            env_index=result.env_index,
            step_count=result.steps,
            cumulative_reward=result.reward,
            terminated=result.terminated,
            truncated=result.truncated,
            duration_ms=result.duration_s * 1000.0,
            final_info=final_info,
            result=result,
        )


@attrs.frozen(slots=True)
class ActionReceivedEvent(_RouteEvent):
    """An action about to be sent to the env (also the input of ``transform_action``).

    ``step`` is the runtime step the action will produce. ``env_indices`` lists
    the lanes the action slab covers, in row order; ``episode_ids`` and
    ``episode_record_ids`` are aligned with it. ``episode_id``/``env_index``
    name the first row.
    """

    episode_id: str
    episode_record_id: str
    episode_ids: tuple[str, ...]
    episode_record_ids: tuple[str, ...]
    env_indices: tuple[int, ...]
    step: int
    env_index: int
    action_space: spaces_pb.SpaceSpec | None
    action: spaces_pb.SpaceValue | None


@attrs.frozen(slots=True)
class StepCompletedEvent(_RouteEvent):
    episode_id: str
    episode_record_id: str
    step: int
    env_index: int
    env_indices: tuple[int, ...]
    rewards: tuple[float, ...]


@attrs.frozen(slots=True)
class ObservationEmittedEvent(_RouteEvent):
    """An observation from the env (also the input of ``transform_observation``).

    ``is_reset`` marks a reset observation. ``observation`` is a slab over
    ``len(env_indices)`` rows.
    """

    episode_id: str
    episode_record_id: str
    episode_ids: tuple[str, ...]
    episode_record_ids: tuple[str, ...]
    env_indices: tuple[int, ...]
    step: int
    env_index: int
    is_reset: bool
    num_envs: int
    observation_space: spaces_pb.SpaceSpec | None
    observation: spaces_pb.SpaceValue | None


@attrs.frozen(slots=True)
class TelemetryWindowEvent(_RouteEvent):
    """Telemetry of one window (``window_start``..``window_end`` in Trio clock seconds)."""

    window_start: float
    window_end: float
    steps: int
    rows: tuple[TelemetryRow, ...]


@attrs.frozen(slots=True)
class TelemetrySummaryEvent(_RouteEvent):
    total_steps: int
    total_episodes: int
    rows: tuple[TelemetryRow, ...]


@attrs.frozen(slots=True)
class SessionEndedEvent(_RouteEvent):
    reason: str
    total_steps: int
    total_episodes: int


@attrs.frozen(slots=True)
class SessionFailedEvent(_RouteEvent):
    """The route failed or was cancelled; ``reason`` is the route error's text. Fires once."""

    reason: str
    error: BaseException | None = attrs.field(default=None, eq=False)


@attrs.frozen(slots=True)
class LogEvent(_RouteEvent):
    """A runtime log line. ``level`` is ``debug``, ``info``, ``warning`` or ``error``."""

    level: str
    message: str
    source: str = "runtime"
