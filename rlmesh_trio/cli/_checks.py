"""Checks on command-line values made before anything runs, each failing as one usage error.

Every check raises :class:`click.UsageError` (exit 2) whose message is the
whole ``error:`` line after the prefix, so a mistake is reported before a
server binds or a route starts, never after a run's results are in.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._errors import InvalidSpec, RlmeshTrioError
from ..transport._address import parse_address

if TYPE_CHECKING:
    from ..report._report import RunReport

__all__ = [
    "check_address",
    "check_address_option",
    "check_finite",
    "check_report_path",
    "spec_mistake",
    "user_message",
]


def user_message(exc: RlmeshTrioError) -> str:
    """What the user reads after ``error:``: an :class:`InvalidSpec`'s detail, without the
    generic "invalid runtime session spec" prefix; any other error's full text."""
    return exc.detail if isinstance(exc, InvalidSpec) else str(exc)


def check_address(text: str) -> str:
    """``text`` unchanged if it parses as an endpoint address.

    Raises:
        click.UsageError: the parser's precise reason ("invalid address '...':
            port out of range: ...").
    """
    try:
        parse_address(text)
    except InvalidSpec as exc:
        raise click.UsageError(exc.detail) from None
    return text


def check_address_option(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """A click callback: the ``--address`` / ``ADDRESS`` value must parse (see check_address)."""
    return None if value is None else check_address(value)


def _folder_label(folder: Path) -> str:
    return str(folder).rstrip("/") + "/"


def check_report_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Any:
    """A click callback for ``--json FILE``: FILE can be written once the run is over.

    Checked before the run so a long evaluation never ends in an unwritable
    path: the folder exists, is a folder and is writable, and FILE itself is
    not a folder.

    Raises:
        click.UsageError: naming the option and the folder or file at fault.
    """
    if value is None:
        return None
    option = param.opts[0] if param.opts else str(param.name)
    if value.is_dir():
        raise click.UsageError(f"{option}: {str(value)!r} is a folder, not a file")
    folder = value.parent
    if not folder.exists():
        raise click.UsageError(f"{option}: folder {_folder_label(folder)!r} does not exist")
    if not folder.is_dir():
        raise click.UsageError(f"{option}: {_folder_label(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise click.UsageError(f"{option}: folder {_folder_label(folder)!r} is not writable")
    return value


def check_finite(_ctx: click.Context, param: click.Parameter, value: float | None) -> Any:
    """A click callback: a number of seconds must be finite (a range type lets nan and inf by).

    Raises:
        click.BadParameter: naming the option.
    """
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number of seconds", param=param)
    return value


def spec_mistake(report: RunReport) -> str | None:
    """The one line to print when a run failed only because its spec was wrong, else None.

    A route can learn that its spec does not fit only after the handshake
    (``--max-episode-steps`` against an env that owns its resets, a seed the
    wire cannot carry): that is still the user's mistake, so when no episode
    finished and every failed route failed with :class:`InvalidSpec`, the CLI
    says so in one line (exit 2) instead of a table of empty routes. When any
    episode finished, the table stays: nothing is hidden.
    """
    failed = [o for o in report.routes if o.status == "failed"]
    if not failed or report.total_episodes:
        return None
    if not all(isinstance(o.error, InvalidSpec) for o in failed):
        return None
    first = failed[0]
    detail = first.error.detail  # type: ignore[union-attr]
    return detail if detail.startswith("route ") else f"route {first.route_id}: {detail}"
