"""What every command shares: exit codes, the one-line error exit, client and server TLS options,
and the helpers that build a command's options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from ._tls import client_context, server_context

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "client_options",
    "client_tls",
    "count_option",
    "fail",
    "server_tls",
    "stack_options",
]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code`` (2: a usage mistake)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def server_tls(cert: Path | None, key: Path | None) -> Any:
    try:
        return server_context(cert, key)
    except click.BadParameter as exc:
        fail(exc.format_message())


def client_tls(ca: Path | None, use_tls: bool) -> Any:
    try:
        return client_context(ca, use_tls)
    except click.BadParameter as exc:
        fail(exc.format_message())


def client_options(token: str | None, ca: Path | None, use_tls: bool) -> dict[str, Any] | None:
    """What every client of the run gets: the bearer token and the TLS context, if any."""
    options: dict[str, Any] = {}
    if token:
        options["token"] = token
    tls = client_context(ca, use_tls)
    if tls is not None:
        options["ssl"] = tls
    return options or None


def stack_options(*options: Callable[[Any], Any]) -> Callable[[F], F]:
    """One decorator made of several click options; ``--help`` lists them in the order given
    (as the same options written as stacked decorators would be)."""

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def count_option(name: str, help: str) -> Callable[[Any], Any]:
    """A whole-number option counting from 0, default 0 (shown in ``--help``)."""
    return click.option(name, type=click.IntRange(0), default=0, show_default=True, help=help)
