"""The end-of-run table and the JSON report file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from ._stats_table import print_statistics

if TYPE_CHECKING:  # rich is imported when a table is printed, not for --help
    from rich.console import Console

    from ..report._report import RunReport

__all__ = ["print_summary", "write_report"]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


_COLUMNS = ("route", "env", "status", "episodes", "steps", "reward", "steps/s")


def print_summary(
    report: RunReport, console: Console | None = None, title: str = "rlmesh-trio run"
) -> None:
    """Per route: status, episodes, steps, mean reward, steps/s; then the totals.

    Steps count every episode of the report (a resumed run's ledger episodes
    too); steps/s only the steps this process made, over the time it took
    (``-`` where it made none: a route the ledger had already finished).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    env_width = min(max((len(o.env) for o in report.routes), default=3), 28)
    for name in _COLUMNS:
        # Keep addresses whole: other columns give way first, then long labels fold.
        width = env_width if name == "env" else None
        justify: Literal["left", "right"] = (
            "left" if name in ("route", "env", "status") else "right"
        )
        table.add_column(name, justify=justify, overflow="fold", min_width=width)
    for outcome in report.routes:
        episodes = outcome.episodes
        mean = sum(ep.reward for ep in episodes) / len(episodes) if episodes else None
        rate = outcome.steps_per_s
        style = {"completed": "green", "failed": "red", "cancelled": "yellow"}[outcome.status]
        table.add_row(
            outcome.route_id,
            outcome.env,
            f"[{style}]{outcome.status}[/]",
            str(len(episodes)),
            f"{outcome.total_steps:,}",
            _fmt(mean, 2),
            _fmt(rate),
        )
    table.add_section()
    table.add_row(
        "total",
        "",
        "",
        str(report.total_episodes),
        f"{report.total_steps:,}",
        _fmt(report.mean_reward, 2),
        _fmt(report.steps_per_s if report.run_steps > 0 else None),
    )
    console.print(table)
    print_statistics(report, console)
    success = "-" if report.success_rate is None else f"{report.success_rate:.1%}"
    console.print(
        f"wall time {report.wall_s:.2f}s, success rate {success} (reward is the mean per episode)"
    )
    for outcome in report.routes:
        if outcome.error is not None and outcome.status == "failed":
            console.print(f"[red]{outcome.route_id}[/]: {outcome.error}", soft_wrap=True)


def write_report(report: RunReport, path: Path) -> bool:
    """Write the JSON report to ``path``; True when it was written.

    The path was checked before the run (see ``_checks.check_report_path``);
    should writing still fail (a full disk, a folder removed meanwhile), the
    report goes to stdout after one ``error:`` line, so no result is lost.
    """
    text = report.to_json() + "\n"
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(
            f"error: --json: cannot write {str(path)!r} ({exc.strerror or exc}); "
            "the report follows on stdout",
            err=True,
        )
        click.echo(text, nl=False)
        return False
    return True
