"""One way to look inside exception groups.

Trio nurseries wrap whatever their body raised in a (possibly nested)
:class:`BaseExceptionGroup`. Code that owns a nursery purely as an
implementation detail should hand its caller the body's own exception, not a
group; these helpers are the one place that unwrapping is written.
"""

from __future__ import annotations

import trio

__all__ = ["first_cancelled", "first_error", "sole_leaf"]


def sole_leaf(exc: BaseException) -> BaseException | None:
    """The only leaf of ``exc`` when it is a group of exactly one (nested groups
    included), ``exc`` itself when it is no group, ``None`` for a group of several."""
    while isinstance(exc, BaseExceptionGroup):
        if len(exc.exceptions) != 1:
            return None
        exc = exc.exceptions[0]
    return exc


def first_error(exc: BaseException) -> BaseException | None:
    """The first leaf of ``exc`` that is not :class:`trio.Cancelled`, depth first,
    or ``None`` when ``exc`` holds nothing but cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        for leaf in exc.exceptions:
            found = first_error(leaf)
            if found is not None:
                return found
        return None
    if isinstance(exc, trio.Cancelled):
        return None
    return exc


def first_cancelled(exc: BaseException) -> BaseException:
    """A bare :class:`trio.Cancelled` out of a group of them (so callers see a plain
    Cancelled), or ``exc`` unchanged when it holds none."""
    if isinstance(exc, BaseExceptionGroup):
        for leaf in exc.exceptions:
            found = first_cancelled(leaf)
            if isinstance(found, trio.Cancelled):
                return found
    return exc
