"""The long-run options of ``rlmesh-trio run``: --dealing, --ledger, --resume, --retries, ..."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ..orchestrator._retry import DEFAULT_BACKOFF
from ._common import count_option, stack_options

__all__ = ["durable_kwargs", "durable_options"]

#: Adds the long-run options to a click command (they arrive as keyword arguments).
durable_options = stack_options(
    click.option(
        "--dealing",
        type=click.Choice(["static", "dynamic"]),
        default="static",
        show_default=True,
        help="static: seeds dealt round-robin up front; dynamic: each --env takes the "
        "next seeds as it comes free (identical env servers; with --backend the pool "
        "runs whole in one shard).",
    ),
    click.option(
        "--ledger",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Append every finished episode to this JSON Lines ledger (never overwritten).",
    ),
    click.option(
        "--resume",
        is_flag=True,
        help="Continue the run recorded in --ledger: run only the episodes it lacks.",
    ),
    count_option(
        "--retries", "Reruns per route after a broken or unreachable env/model connection."
    ),
    click.option(
        "--retry-backoff",
        type=click.FloatRange(min=0),
        default=DEFAULT_BACKOFF,
        show_default=True,
        help="Seconds before the first retry (doubling, jittered, capped at 30 s).",
    ),
)


def durable_kwargs(values: Mapping[str, Any], *, local: bool = True) -> dict[str, Any]:
    """The options as ``Orchestrator`` keyword arguments (argv recorded in the ledger);
    ``local=False``: as ``run_distributed``'s, whose coordinator writes no route ends."""
    if values.get("resume") and values.get("ledger") is None:
        raise click.BadParameter("--resume needs --ledger FILE")
    return {
        "ledger": values.get("ledger"),
        "resume": bool(values.get("resume")),
        "retries": int(values.get("retries") or 0),
        "retry_backoff": float(values.get("retry_backoff", DEFAULT_BACKOFF)),
        "argv": list(sys.argv),
        # Route ends go in the ledger too, so `rlmesh-trio watch` can show why a route stopped.
        **({"ledger_route_ends": values.get("ledger") is not None} if local else {}),
    }
