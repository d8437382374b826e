"""A hooks object that writes a route's life to :mod:`logging`."""

from __future__ import annotations

import logging

from ..runtime._events import (
    EpisodeCompletedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from ..runtime._hooks import RuntimeHooks

__all__ = ["LoggingHooks"]


class LoggingHooks(RuntimeHooks):
    """Logs session start/end/failure and each finished episode.

    Every line starts with the route id, so one logger can watch many routes.
    The driver's own diagnostics already go to the ``rlmesh_trio.runtime``
    logger (and to ``RuntimeHooks.log``), so they are not repeated here.
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
