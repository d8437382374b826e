"""``--dashboard`` for ``run`` and ``demo``, and the ``watch`` command.

The dashboard package (and its extra) is imported only when asked for: a
missing extra ends as one ``error: ...`` line naming the install command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from .._errors import InvalidSpec
from ._common import fail, stack_options

__all__ = ["close_dashboard", "dashboard_options", "open_dashboard", "watch_cmd"]

#: How long a finished run waits for open pages to load the final report.
LINGER = 10.0
DEFAULT_ADDRESS = "127.0.0.1:0"


def dashboard_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--dashboard [HOST:PORT]`` and ``--dashboard-token``."""
    return stack_options(
        click.option(
            "--dashboard",
            "dashboard",
            is_flag=False,
            flag_value=DEFAULT_ADDRESS,
            default=None,
            metavar="[HOST:PORT]",
            help="Serve a live page of the run (default 127.0.0.1 and a free port; the URL "
            "is printed). Needs the dashboard extra.",
        ),
        click.option(
            "--dashboard-token",
            envvar="RLMESH_TRIO_DASHBOARD_TOKEN",
            help="Token the page asks for; required to bind the dashboard beyond loopback.",
        ),
    )(command)


def open_dashboard(
    address: str | None,
    token: str | None,
    routes: Sequence[Any] = (),
    recording: Any = None,
    title: str = "rlmesh-trio run",
) -> Any:
    """A started ``Dashboard`` (its URL printed on stderr), or ``None`` without ``--dashboard``.

    Exits 2 with one line for a bad address, a missing token or a missing extra.
    """
    if address is None:
        return None
    from ..dashboard import DashboardUnavailable, require_extra
    from ..dashboard._hook import Dashboard, check_address

    try:
        check_address(address, token)  # what the user typed first, then what is installed
        require_extra()
        dashboard = Dashboard(
            routes, address=address, token=token, title=title, recording=recording
        )
        url = dashboard.start()
    except (DashboardUnavailable, InvalidSpec) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"dashboard address {address}: {exc.strerror or exc}")
    click.echo(f"dashboard: {url}", err=True)
    return dashboard


def close_dashboard(dashboard: Any, report: Any, media: Mapping[Any, Any] | None) -> None:
    """Show the final report, give open pages a moment to load it, stop the server."""
    if dashboard is None:
        return
    dashboard.finish(report, media)
    dashboard.wait_viewed(LINGER)
    dashboard.close()


@click.command("watch")
@click.argument("ledger", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--address",
    default=DEFAULT_ADDRESS,
    show_default=True,
    help="Where to serve the page (HOST:PORT; port 0 picks a free one).",
)
@click.option(
    "--token",
    envvar="RLMESH_TRIO_DASHBOARD_TOKEN",
    help="Token the page asks for; required to bind beyond loopback.",
)
def watch_cmd(ledger: Path, address: str, token: str | None) -> None:
    """Serve the live page of the run writing LEDGER (another process, shell or machine),
    following the file as it grows; the final report once every route has ended. LEDGER may
    not exist yet (its folder must); a file that is not a ledger is refused. Ctrl+C stops.
    """
    from ..dashboard import DashboardUnavailable, require_extra
    from ..dashboard._hook import check_address
    from ..orchestrator._ledger import check_ledger_place

    try:
        require_extra()
        check_address(address, token)
        check_ledger_place(ledger)
    except (DashboardUnavailable, InvalidSpec) as exc:
        fail(str(exc))
    if ledger.is_dir():
        fail(f"ledger {ledger}: is a folder, not a file")
    import trio

    from ..dashboard._thread import first_error

    try:
        trio.run(_watch, ledger, address, token)
    except KeyboardInterrupt:
        return
    except BaseException as group:
        cause = first_error(group)
        if isinstance(cause, KeyboardInterrupt):
            return
        if isinstance(cause, InvalidSpec):  # LedgerError: not a ledger (now or later)
            fail(str(cause))
        if isinstance(cause, OSError):
            fail(f"dashboard address {address}: {cause.strerror or cause}")
        raise


async def _watch(ledger: Path, address: str, token: str | None) -> None:
    import trio

    from ..dashboard import watch_ledger

    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            lambda task_status: watch_ledger(
                ledger, address=address, token=token, task_status=task_status
            )
        )
        click.echo(f"watching {ledger}: {url}", err=True)
        if not ledger.exists() or ledger.stat().st_size == 0:
            click.echo(f"waiting for a run to write {ledger}", err=True)
