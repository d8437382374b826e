"""What every command shares: exit codes, the one-line error exit, client and server TLS options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from ._tls import client_context, server_context

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "client_options",
    "client_tls",
    "fail",
    "server_tls",
]

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
