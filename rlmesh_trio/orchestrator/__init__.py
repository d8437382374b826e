"""The multi-route orchestrator: many routes under one nursery."""

from typing import TYPE_CHECKING

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy), so a module
# that needs one part (the CLI's retry default, the ledger reader) loads no more.
if TYPE_CHECKING:
    from ..report import RouteOutcome, RunFailed, RunMeta, RunReport
    from ._durable import load_ledger
    from ._ledger import LedgerError, LedgerExists
    from ._plan import PlanMismatch
    from ._route import Route, shard
    from ._run import Orchestrator, RunInterrupted, run, run_routes
else:
    from .._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "..report": ("RouteOutcome", "RunFailed", "RunMeta", "RunReport"),
            "._durable": ("load_ledger",),
            "._ledger": ("LedgerError", "LedgerExists"),
            "._plan": ("PlanMismatch",),
            "._route": ("Route", "shard"),
            "._run": ("Orchestrator", "RunInterrupted", "run", "run_routes"),
        },
    )

__all__ = [
    "LedgerError",
    "LedgerExists",
    "Orchestrator",
    "PlanMismatch",
    "Route",
    "RouteOutcome",
    "RunFailed",
    "RunInterrupted",
    "RunMeta",
    "RunReport",
    "load_ledger",
    "run",
    "run_routes",
    "shard",
]
