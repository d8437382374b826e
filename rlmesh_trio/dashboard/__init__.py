"""The live dashboard: one browser page for every route of a run, updated as it runs.

* :class:`Dashboard`: a hook for a run in this process (``rt.hooks.Dashboard``).
* :func:`watch_ledger`: the same page from a ledger another process is writing.

The web stack (hypercorn's Trio worker, Starlette) is the ``dashboard``
extra, imported only when a server starts; without it, starting one raises
:class:`DashboardUnavailable` naming ``pip install 'rlmesh-trio[dashboard]'``.
"""

from ._follow import LedgerFollower, watch_ledger
from ._hook import Dashboard
from ._server import DashboardUnavailable, require_extra
from ._state import DashboardState

__all__ = [
    "Dashboard",
    "DashboardState",
    "DashboardUnavailable",
    "LedgerFollower",
    "require_extra",
    "watch_ledger",
]
