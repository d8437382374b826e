"""A hooks object that writes a route's life to :mod:`logging`."""

from __future__ import annotations

import logging

from ..runtime import (
    EpisodeCompletedEvent,
    LogEvent,
    RuntimeHooks,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)

__all__ = ["LoggingHooks"]

_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class LoggingHooks(RuntimeHooks):
    """Logs session start/end/failure, each finished episode, and the driver's own log events.

    Every line starts with the route id, so one logger can watch many routes.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self.logger = logger or logging.getLogger("rlmesh_trio.route")
        self.level = level

    async def session_started(self, event: SessionStartedEvent) -> None:
        self.logger.log(
            self.level, "[%s] session started (env_id %s)", event.route.route_id, event.route.env_id
        )

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        self.logger.log(
            self.level,
            "[%s] episode %s done: %d steps, reward %.3f%s",
            event.route.route_id,
            event.episode_record_id or event.episode_id,
            event.step_count,
            event.cumulative_reward,
            " (truncated)" if event.truncated else "",
        )

    async def session_ended(self, event: SessionEndedEvent) -> None:
        self.logger.log(
            self.level,
            "[%s] session ended: %s (%d steps, %d episodes)",
            event.route.route_id,
            event.reason,
            event.total_steps,
            event.total_episodes,
        )

    async def session_failed(self, event: SessionFailedEvent) -> None:
        self.logger.warning("[%s] session failed: %s", event.route.route_id, event.reason)

    async def log(self, event: LogEvent) -> None:
        level = _LEVELS.get(event.level.lower(), logging.INFO)
        self.logger.log(level, "[%s] %s", event.route.route_id, event.message)
