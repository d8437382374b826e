"""Hooks: watch every route of a run (events) or rewrite its payloads (transforms).

Events are best-effort: a failing event hook is logged and the route goes on.
Transforms are fatal: a failing transform ends the route with ``HookError``.
One hooks object can watch many routes; each event names its route in
``event.route``. :class:`ValueTransform` rewrites observations and actions as
the numpy / gymnasium values users hold; ``RuntimeHooks.transform_*`` work on
the wire's ``SpaceValue`` slabs.

:class:`Dashboard` (a live browser page for the whole run) is imported on
first use: it lives in :mod:`rlmesh_trio.dashboard`, above the orchestrator.
"""

from typing import Any

from ..runtime import HookChain, RuntimeHooks, events
from ._logging import LoggingHooks
from ._progress import RichProgress
from ._values import ValueTransform

__all__ = [
    "Dashboard",
    "HookChain",
    "LoggingHooks",
    "RichProgress",
    "RuntimeHooks",
    "ValueTransform",
    "events",
]


def __getattr__(name: str) -> Any:
    if name == "Dashboard":
        from ..dashboard import Dashboard

        return Dashboard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
