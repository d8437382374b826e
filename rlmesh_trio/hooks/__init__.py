"""Hooks: watch every route of a run (events) or rewrite its payloads (transforms).

Events are best-effort: a failing event hook is logged and the route goes on.
Transforms are fatal: a failing transform ends the route with ``HookError``.
One hooks object can watch many routes; each event names its route in
``event.route``. :class:`ValueTransform` rewrites observations and actions as
the numpy / gymnasium values users hold; ``RuntimeHooks.transform_*`` work on
the wire's ``SpaceValue`` slabs. The base class and the combinator are
``rt.RuntimeHooks`` and ``rt.HookChain``; the event classes are in :mod:`.events`.

:class:`Dashboard` (a live browser page for the whole run) is imported on
first use: it is defined in the dashboard package, above the orchestrator.
The old ``rlmesh_trio.hooks.HookChain`` / ``RuntimeHooks`` paths still read,
each with a ``DeprecationWarning`` naming ``rlmesh_trio``, until the release in
``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

__all__ = [
    "Dashboard",
    "LoggingHooks",
    "RichProgress",
    "ValueTransform",
    "events",
]

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy): rich is loaded
# by the first RichProgress, the dashboard's web stack never by this package.
if TYPE_CHECKING:
    from ..dashboard._hook import Dashboard
    from . import events
    from ._logging import LoggingHooks
    from ._progress import RichProgress
    from ._values import ValueTransform
else:
    from .._deprecated import moved_names
    from .._lazy import lazy_exports

    __getattr__, __dir__ = moved_names(
        __name__,
        *lazy_exports(
            __name__,
            {
                "..dashboard._hook": ("Dashboard",),
                "._logging": ("LoggingHooks",),
                "._progress": ("RichProgress",),
                "._values": ("ValueTransform",),
            },
            submodules=("events",),
        ),
    )
