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

from typing import TYPE_CHECKING

__all__ = [
    "Dashboard",
    "HookChain",
    "LoggingHooks",
    "RichProgress",
    "RuntimeHooks",
    "ValueTransform",
    "events",
]

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy): rich is loaded
# by the first RichProgress, the dashboard's web stack never by this package.
if TYPE_CHECKING:
    from ..dashboard import Dashboard
    from ..runtime import HookChain, RuntimeHooks, events
    from ._logging import LoggingHooks
    from ._progress import RichProgress
    from ._values import ValueTransform
else:
    from .._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "..dashboard": ("Dashboard",),
            "..runtime": ("HookChain", "RuntimeHooks", "events"),
            "._logging": ("LoggingHooks",),
            "._progress": ("RichProgress",),
            "._values": ("ValueTransform",),
        },
    )
