"""The multi-route orchestrator: many routes under one nursery."""

from ._report import RouteOutcome, RunFailed, RunReport
from ._route import Route, shard
from ._run import Orchestrator, RunInterrupted, run, run_routes

__all__ = [
    "Orchestrator",
    "Route",
    "RouteOutcome",
    "RunFailed",
    "RunInterrupted",
    "RunReport",
    "run",
    "run_routes",
    "shard",
]
