"""The multi-route orchestrator: many routes under one nursery."""

from ..report import RouteOutcome, RunFailed, RunMeta, RunReport
from ._durable import load_ledger
from ._ledger import LedgerError, LedgerExists
from ._plan import PlanMismatch
from ._route import Route, shard
from ._run import Orchestrator, RunInterrupted, run, run_routes

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
