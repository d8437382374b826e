"""The summary's second table: each route's episode returns with 95% bootstrap intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._extras import MissingExtra

if TYPE_CHECKING:  # rich is imported when a table is printed, not for --help
    from rich.console import Console

    from ..report._report import RunReport

__all__ = ["format_interval", "format_value", "print_statistics"]


def format_value(value: float | None) -> str:
    """A figure with as many decimals as its size deserves (3 significant digits or more)."""
    if value is None:
        return "-"
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 10 else 2
    return f"{value:,.{digits}f}"


def format_interval(interval: Sequence[float] | None) -> str:
    """``"-482 to -474"``: a dash between two numbers that may be negative misleads."""
    return "-" if not interval else f"{format_value(interval[0])} to {format_value(interval[1])}"


def _row(name: str, figures: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        name,
        str(figures["n"]),
        format_value(figures["mean"]),
        format_interval(figures["meanCi"]),
        format_value(figures["iqm"]),
        format_interval(figures["iqmCi"]),
    )


def print_statistics(report: RunReport, console: Console) -> None:
    """Per route and for the run: mean return and IQM, each with its 95% bootstrap CI.

    Nothing is printed for a run without episodes; one line saying what to
    install when scipy (the ``results`` extra) is missing.
    """
    if not report.total_episodes:
        return
    try:
        stats = report.statistics()
    except MissingExtra as exc:
        text = f"95% intervals left out: {exc}"
        console.print(text, style="dim", markup=False, highlight=False)
        return
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    for name in ("returns", "n", "mean", "95% CI", "IQM", "IQM 95% CI"):
        table.add_column(name, justify="left" if name == "returns" else "right")
    for outcome in report.routes:
        if outcome.episodes:
            table.add_row(*_row(outcome.route_id, stats["routes"][outcome.route_id]))
    if len(report.routes) > 1:
        table.add_section()
        table.add_row(*_row("all routes", stats["run"]))
    console.print(table)
