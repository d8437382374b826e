"""The live dashboard: one browser page for every route of a run, updated as it runs.

* ``rt.hooks.Dashboard``: a hook for a run in this process (defined here, its one
  public home is :mod:`rlmesh_trio.hooks`; ``rlmesh_trio.dashboard.Dashboard`` still
  reads, with a ``DeprecationWarning``, until the release in
  ``rlmesh_trio._deprecated.REMOVED_IN``).
* :func:`watch_ledger`: the same page from a ledger another process is writing.

The web stack (hypercorn's Trio worker, Starlette) is the ``dashboard``
extra, imported only when a server starts; without it, starting one raises
:class:`DashboardUnavailable` naming ``pip install 'rlmesh-trio[dashboard]'``.
"""

from typing import TYPE_CHECKING

from ._follow import LedgerFollower, watch_ledger
from ._server import DashboardUnavailable, require_extra
from ._state import DashboardState

__all__ = [
    "DashboardState",
    "DashboardUnavailable",
    "LedgerFollower",
    "require_extra",
    "watch_ledger",
]

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
