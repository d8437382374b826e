"""TLS contexts from command-line paths, with errors that name the option and the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # ssl is imported when a context is made, not for --help
    import ssl

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["client_context", "client_tls_options", "server_context", "server_tls_options"]

_ALPN = ["h2"]  # gRPC runs over HTTP/2


def server_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """A server context from ``--tls-cert``/``--tls-key`` (both or neither)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.BadParameter("--tls-cert and --tls-key go together")
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise click.BadParameter(
            f"--tls-cert {cert} / --tls-key {key}: could not load the certificate and key: {exc}"
        ) from None
    context.set_alpn_protocols(_ALPN)
    return context


def client_context(ca: Path | None, enabled: bool) -> ssl.SSLContext | None:
    """A client context: verify servers against ``--tls-ca``, or the system roots (``--tls``)."""
    if ca is None and not enabled:
        return None
    import ssl

    try:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(ca) if ca is not None else None
        )
    except (OSError, ssl.SSLError) as exc:
        raise click.BadParameter(
            f"--tls-ca {ca}: could not load the CA certificates: {exc}"
        ) from None
    context.set_alpn_protocols(_ALPN)
    return context


def server_tls_options(command: F) -> F:
    """``--tls-cert`` / ``--tls-key`` for a serving command."""
    command = click.option(
        "--tls-key", type=click.Path(path_type=Path), help="The certificate's private key."
    )(command)
    return click.option(
        "--tls-cert", type=click.Path(path_type=Path), help="Serve TLS with this certificate (PEM)."
    )(command)


def client_tls_options(command: F) -> F:
    """``--tls-ca`` / ``--tls`` for a command that connects to servers."""
    command = click.option(
        "--tls", "use_tls", is_flag=True, help="Use TLS, verifying against the system roots."
    )(command)
    return click.option(
        "--tls-ca",
        type=click.Path(path_type=Path),
        help="Use TLS, verifying servers against these CA certificates (PEM).",
    )(command)
