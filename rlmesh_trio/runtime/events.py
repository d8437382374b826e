"""Hook event classes (also re-exported from ``rlmesh_trio.runtime``)."""

from ._events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    ObservationEmittedEvent,
    RouteContext,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
    TelemetrySummaryEvent,
    TelemetryWindowEvent,
)

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
