"""``rlmesh-trio report RUN.json``: a finished run's bundle, HTML report and summary."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .._errors import RlmeshTrioError
from ._checks import user_message
from ._results import check_bundle_path, need_extra

__all__ = ["report_cmd"]


@click.command("report")
@click.argument("run_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--bundle",
    type=click.Path(path_type=Path),
    help="Write an rlmesh.result.v1 bundle here (a folder; a zip if it ends .zip).",
)
@click.option(
    "--html",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a self-contained HTML report here.",
)
@click.option("--title", help="Title of the HTML report (default: the file name).")
def report_cmd(run_file: Path, bundle: Path | None, html: Path | None, title: str | None) -> None:
    """Summarise RUN_FILE (a run's --json report or its --ledger) with 95% CIs; write a
    bundle or HTML from it.

    Videos exist only while a run records them: use --record with --bundle or
    --html on `run` or `demo` to keep them.
    """
    from ..results import load_run, write_html
    from ._summary import print_summary

    if html is not None:
        need_extra("plotly", extra="results", purpose="--html (plotly)")
    try:
        if bundle is not None:
            check_bundle_path(bundle)
        report = load_run(run_file)
        print_summary(report, title=f"rlmesh-trio report: {run_file.name}")
        if bundle is not None:
            report.export_bundle(bundle)
            click.echo(f"bundle written to {bundle}")
        if html is not None:
            write_html(report, html, title=title or f"rlmesh-trio report: {run_file.name}")
            click.echo(f"HTML report written to {html}")
    except click.BadParameter as exc:
        _usage(exc.format_message())
    except RlmeshTrioError as exc:
        _usage(user_message(exc))
    except OSError as exc:
        _usage(str(exc))


def _usage(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)
