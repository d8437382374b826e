"""``--limit NAME=VALUE`` for the serve commands: fields of :class:`rlmesh_trio.ServerLimits`."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import click

from .._wire import ServerLimits
from ._common import fail

__all__ = ["limit_option", "server_limits"]

_FIELDS = {field.name: field for field in attrs.fields(ServerLimits)}

limit_option = click.option(
    "--limit",
    "limits",
    multiple=True,
    metavar="NAME=VALUE",
    help="Change one server limit (repeatable), e.g. --limit idle-timeout=60 or "
    "--limit max-connections=64; names: " + ", ".join(n.replace("_", "-") for n in _FIELDS),
)


def server_limits(items: Sequence[str]) -> ServerLimits | None:
    """The limits ``--limit`` asked for (``None``: none given, the defaults).

    Exits with ``error: ...`` (code 2) for an unknown name or a bad value.
    """
    if not items:
        return None
    changes: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        key = name.strip().replace("-", "_")
        if not sep or key not in _FIELDS:
            fail(f"--limit {item!r}: expected NAME=VALUE with NAME one of the server limits")
        whole = isinstance(_FIELDS[key].default, int)
        try:
            value: float = int(raw) if whole else float(raw)
        except ValueError:
            fail(f"--limit {item!r}: {raw!r} is not {'a whole number' if whole else 'a number'}")
        changes[key] = value
    try:
        return ServerLimits(**changes)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        fail(f"--limit: {exc}")
