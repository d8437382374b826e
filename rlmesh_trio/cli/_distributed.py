"""``rlmesh-trio run --backend ray|processes``: the same routes, sharded by the coordinator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from .._errors import InvalidSpec
from ._checks import user_message
from ._common import fail

if TYPE_CHECKING:
    from ..orchestrator._route import Route
    from ..report._report import RunReport

__all__ = ["backend_options", "run_distributed_cli"]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def backend_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--backend``, ``--ray-address`` and ``--shards`` on a command."""
    command = click.option(
        "--shards",
        type=click.IntRange(1),
        help="Shards for --backend ray|processes (default: the backend's CPU count; "
        "a --dealing dynamic pool is one shard).",
    )(command)
    command = click.option(
        "--ray-address",
        help="Ray cluster to join with --backend ray ('auto' or host:port; default: start one).",
    )(command)
    command = click.option(
        "--backend",
        type=click.Choice(["local", "processes", "ray"]),
        default="local",
        show_default=True,
        help="Where routes run: this process, one process per shard, or a Ray cluster "
        "(the ray extra).",
    )(command)
    return command


def check_backend_options(backend: str, ray_address: str | None, shards: int | None) -> str | None:
    """A usage mistake in the backend options, or None."""
    if backend != "ray" and ray_address is not None:
        return "--ray-address goes with --backend ray"
    if backend == "local" and shards is not None:
        return "--shards goes with --backend ray or processes"
    return None


def run_distributed_cli(
    routes: Sequence[Route],
    backend: str,
    ray_address: str | None,
    shards: int | None,
    progress: bool,
    **options: Any,
) -> tuple[RunReport, int, str]:
    """Run on the chosen backend; (report, exit code, message) as a local run gives them."""
    from ..distributed._api import run_distributed
    from ..hooks import RichProgress
    from ..orchestrator._run import RunInterrupted
    from ..report._report import RunFailed

    chosen: Any = backend
    bars = RichProgress(routes, transient=True) if progress else None
    try:
        if bars is not None:
            with bars:
                report = run_distributed(
                    routes, chosen, address=ray_address, shards=shards, hooks=bars, **options
                )
        else:
            report = run_distributed(routes, chosen, address=ray_address, shards=shards, **options)
    except RunFailed as exc:
        return exc.report, EXIT_FAILED, str(exc)
    except RunInterrupted as exc:
        return exc.report, EXIT_INTERRUPTED, "interrupted; partial report kept"
    except InvalidSpec as exc:  # the ledger refused the run (exists, another plan): nothing ran
        fail(user_message(exc))
    if report.meta is not None and report.meta.resumed:
        click.echo(report.meta.resumed, err=True)
    failed = [o for o in report.routes if o.status != "completed"]
    if failed:
        return report, EXIT_FAILED, f"{len(failed)} route(s) failed; first: {failed[0].error}"
    return report, 0, ""
