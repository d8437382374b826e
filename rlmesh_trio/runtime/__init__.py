"""The route driver: the reference runtime loop, on Trio.

A route pairs one env endpoint with one model endpoint. ``rt.RouteDriver``
runs its reset -> predict -> step loop under a ``rt.RouteSpec`` and
``rt.Limits``, reports through ``rt.RuntimeHooks`` (events in
:mod:`rlmesh_trio.hooks.events`) and returns a ``rt.RouteReport``. Endpoints
implement ``rt.RuntimeEnv`` / ``rt.RuntimeModel`` (gRPC clients, in-process
adapters, or the fakes of ``rlmesh_trio.testing``).

Those names live at ``rlmesh_trio``; this package exports only the driver's
constants and helpers below. The old ``rlmesh_trio.runtime.<name>`` paths of the
moved names (and of the event classes, now in ``rlmesh_trio.hooks.events``) still
read, each with a ``DeprecationWarning`` naming the home, until the release in
``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

from ._driver import DEFAULT_CANCEL_REASON, END_REASON
from ._results import EpisodeRecord
from ._spec import DEFAULT_MAX_EPISODE_STEPS, mint_uuid7
from ._telemetry import merge_telemetry

__all__ = [
    "DEFAULT_CANCEL_REASON",
    "DEFAULT_MAX_EPISODE_STEPS",
    "END_REASON",
    "EpisodeRecord",
    "merge_telemetry",
    "mint_uuid7",
]

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
