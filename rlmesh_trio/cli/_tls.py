"""TLS contexts from command-line paths, with errors that name the option and the file."""

from __future__ import annotations

import ssl
from pathlib import Path

import click

__all__ = ["client_context", "server_context"]

_ALPN = ["h2"]  # gRPC runs over HTTP/2


def server_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """A server context from ``--tls-cert``/``--tls-key`` (both or neither)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.BadParameter("--tls-cert and --tls-key go together")
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
