"""How a route calls its hooks: best-effort events, fatal transforms, and which ones listen.

The flags (``started``, ``action`` ...) say which hook methods are overridden,
so the loop never builds an event nobody listens to. With no hooks given,
every flag is off and only the lifecycle events reach the base no-ops.
"""

from __future__ import annotations

import logging
from typing import Any

from .._errors import HookError
from .._protocol import spaces_pb
from ._events import LogEvent, RouteContext, TelemetrySummaryEvent, TelemetryWindowEvent
from ._hooks import RuntimeHooks, overrides
from ._telemetry import RouteTelemetry

__all__ = ["HookGate", "logger"]

logger = logging.getLogger("rlmesh_trio.runtime")
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class HookGate:
    """One route's hooks, called the way the reference driver calls them."""

    __slots__ = (
        "action",
        "completed",
        "ctx",
        "hooks",
        "log_hook",
        "observation",
        "route_id",
        "started",
        "step",
        "summary",
        "transform_action",
        "transform_observation",
        "window",
    )

    def __init__(self, hooks: RuntimeHooks | None, ctx: RouteContext) -> None:
        self.hooks: RuntimeHooks = hooks if hooks is not None else RuntimeHooks()
        self.ctx = ctx
        self.route_id = ctx.route_id
        self.started = overrides(hooks, "episode_started")
        self.completed = overrides(hooks, "episode_completed")
        self.action = overrides(hooks, "action_received")
        self.transform_action = overrides(hooks, "transform_action")
        self.step = overrides(hooks, "step_completed")
        self.observation = overrides(hooks, "observation_emitted")
        self.transform_observation = overrides(hooks, "transform_observation")
        self.window = overrides(hooks, "telemetry_window")
        self.summary = overrides(hooks, "telemetry_summary")
        self.log_hook = overrides(hooks, "log")

    async def emit(self, name: str, event: Any) -> None:
        """A best-effort event: a failing hook is logged and the route goes on.

        Cancellation: the hook is cancelled with the route.
        """
        try:
            await getattr(self.hooks, name)(event)
        except Exception as exc:
            logger.warning("route %s: runtime hook %s failed: %s", self.route_id, name, exc)
            if name != "log" and self.log_hook:
                try:
                    await self.hooks.log(
                        LogEvent(self.ctx, "warning", f"runtime hook {name} failed: {exc}")
                    )
                except Exception as log_exc:
                    logger.warning("route %s: runtime hook log failed: %s", self.route_id, log_exc)

    async def transform(self, name: str, event: Any) -> spaces_pb.SpaceValue | None:
        """A transform: its failure is fatal to the route.

        Raises:
            HookError: the transform failed.
        """
        try:
            value: spaces_pb.SpaceValue | None = await getattr(self.hooks, name)(event)
        except HookError:
            raise
        except Exception as exc:
            logger.warning("route %s: runtime hook %s failed: %s", self.route_id, name, exc)
            raise HookError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
        return value

    async def log(self, level: str, message: str) -> None:
        """A route log line: to the ``rlmesh_trio.runtime`` logger and the ``log`` hook."""
        logger.log(_LEVELS.get(level, logging.INFO), "route %s: %s", self.route_id, message)
        if self.log_hook:
            await self.emit("log", LogEvent(self.ctx, level, message))

    async def emit_window(self, telemetry: RouteTelemetry, now: float) -> None:
        """Close the current telemetry window; a ``telemetry_window`` hook sees its rows."""
        window = telemetry.take_window(now)
        if window is not None and self.window:
            start, end, steps, rows = window
            await self.emit(
                "telemetry_window", TelemetryWindowEvent(self.ctx, start, end, steps, rows)
            )

    async def flush_telemetry(
        self, telemetry: RouteTelemetry, now: float, steps: int, episodes: int
    ) -> None:
        """The last window, then ``telemetry_summary`` (its rows, which sort every sample,
        built only when a hook listens)."""
        await self.emit_window(telemetry, now)
        if self.summary:
            await self.emit(
                "telemetry_summary",
                TelemetrySummaryEvent(self.ctx, steps, episodes, telemetry.summary()),
            )
