"""Endpoint addresses: parse the spellings rlmesh-wire-v1 peers accept.

Accepted forms (protocol notes §8): ``host:port``, ``tcp://host:port``,
``http://host:port``, ``unix:///abs/path``, a bare ``port`` or ``:port``
(meaning 127.0.0.1), and bracketed IPv6 hosts (``[::1]:5555``). ``https://``
is refused: TLS is chosen with an explicit ``ssl`` context, not by scheme.
"""

from __future__ import annotations

import attrs

from .._errors import InvalidSpec

__all__ = ["DEFAULT_HOST", "Address", "parse_address"]

DEFAULT_HOST = "127.0.0.1"


@attrs.frozen
class Address:
    """An address as :func:`parse_address` validated it: ``host``/``port`` (TCP) or ``path``."""

    host: str | None = None
    port: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return f"unix://{self.path}"
        host = self.host or DEFAULT_HOST
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        return f"{host}:{self.port}"


def _fail(text: str, why: str) -> InvalidSpec:
    return InvalidSpec(f"invalid address {text!r}: {why}")


def _parse_port(text: str, raw: str) -> int:
    if not raw:
        raise _fail(text, "missing port (expected host:port)")
    if not raw.isdigit():
        raise _fail(text, f"port {raw!r} is not a number")
    port = int(raw)
    if port > 65535:
        raise _fail(text, f"port out of range: {port} is not in 0..65535")
    return port


def _strip_scheme(text: str, raw: str) -> str:
    """``raw`` without its ``tcp://``/``http://`` prefix; refuse every other scheme."""
    lowered = raw.lower()
    for scheme in ("tcp://", "http://"):
        if lowered.startswith(scheme):
            rest = raw[len(scheme) :].rstrip("/")
            if not rest:
                raise _fail(text, f"no host or port after {scheme!r} (expected {scheme}host:port)")
            return rest
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise _fail(text, f"unsupported scheme {scheme!r} (use tcp://, http:// or unix://)")
    return raw.rstrip("/")


def _parse_unix(text: str, path: str) -> Address:
    if not path:
        raise _fail(text, "no socket path after 'unix://' (use unix:///abs/path)")
    if not path.startswith("/"):
        raise _fail(text, "a unix socket address needs an absolute path (unix:///abs/path)")
    return Address(path=path)


def parse_address(text: str) -> Address:
    """Parse an endpoint address; the one place an address is validated.

    Clients, servers, routes and the CLI all call this before anything is
    opened, so a malformed address fails up front with the same message.

    Raises:
        InvalidSpec: ``text`` is not an address; the message names ``text`` and
            the precise reason ("invalid address '127.0.0.1:99999': port out of
            range: ...").
    """
    if not isinstance(text, str):
        raise _fail(repr(text), "an address must be a string")
    raw = text.strip()
    if not raw:
        raise _fail(text, "empty address")
    lowered = raw.lower()
    if lowered.startswith("https://"):
        raise _fail(text, "https:// is not supported; pass an ssl context to use TLS")
    if lowered.startswith("unix://"):
        return _parse_unix(text, raw[len("unix://") :])
    raw = _strip_scheme(text, raw)
    if "/" in raw:
        raise _fail(text, "an address has no path part")
    if raw.isdigit():
        return Address(host=DEFAULT_HOST, port=_parse_port(text, raw))
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise _fail(text, "expected [ipv6]:port")
        return Address(host=host, port=_parse_port(text, rest[1:]))
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        raise _fail(text, "missing port (expected host:port)")
    if ":" in host:
        raise _fail(text, "IPv6 hosts must be bracketed ([::1]:port)")
    return Address(host=host or DEFAULT_HOST, port=_parse_port(text, port_text))
