"""The route driver: the reference runtime loop, on Trio.

A route pairs one env endpoint with one model endpoint. :class:`RouteDriver`
runs its reset -> predict -> step loop under a :class:`RouteSpec` and
:class:`Limits`, reports through :class:`RuntimeHooks` and returns a
:class:`RouteReport`. Endpoints implement :class:`RuntimeEnv` /
:class:`RuntimeModel` (gRPC clients, in-process adapters, or the fakes of
``rlmesh_trio.testing``).
"""

from .._endpoints import EndpointInfo, Reply, RuntimeEnv, RuntimeModel
from . import events
from ._driver import DEFAULT_CANCEL_REASON, END_REASON, RouteDriver
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
from ._hooks import HookChain, RuntimeHooks
from ._results import EpisodeRecord, EpisodeResult, RouteReport, TelemetryRow
from ._spec import DEFAULT_MAX_EPISODE_STEPS, Limits, RouteSpec, mint_uuid7
from ._telemetry import merge_telemetry

__all__ = [
    "DEFAULT_CANCEL_REASON",
    "DEFAULT_MAX_EPISODE_STEPS",
    "END_REASON",
    "ActionReceivedEvent",
    "EndpointInfo",
    "EpisodeCompletedEvent",
    "EpisodeRecord",
    "EpisodeResult",
    "EpisodeStartedEvent",
    "HookChain",
    "Limits",
    "LogEvent",
    "ObservationEmittedEvent",
    "Reply",
    "RouteContext",
    "RouteDriver",
    "RouteReport",
    "RouteSpec",
    "RuntimeEnv",
    "RuntimeHooks",
    "RuntimeModel",
    "SessionEndedEvent",
    "SessionFailedEvent",
    "SessionStartedEvent",
    "StepCompletedEvent",
    "TelemetryRow",
    "TelemetrySummaryEvent",
    "TelemetryWindowEvent",
    "events",
    "merge_telemetry",
    "mint_uuid7",
]
