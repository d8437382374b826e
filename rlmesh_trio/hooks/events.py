"""The hook event classes: what each ``RuntimeHooks`` method receives.

Each event names its route in ``event.route`` (a :class:`RouteContext`).
"""

from ..runtime._events import (
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
