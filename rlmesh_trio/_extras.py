"""Optional heavy dependencies, imported where they are used and named by their extra.

The core installs lean (no scipy, plotly, PyAV or pygame); each heavy part
belongs to an extra of the ``rlmesh-trio`` distribution. :func:`require` is
the one place that turns a missing one into an error saying what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ._errors import RlmeshTrioError

__all__ = ["MissingExtra", "extra_hint", "require"]


class MissingExtra(RlmeshTrioError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it.

    An :class:`ImportError` too, so code that already guards an import keeps working.
    """

    def __init__(self, message: str, extra: str = "") -> None:
        super().__init__(message)
        self.extra = extra

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str]]:
        return type(self), (str(self), self.extra)


def extra_hint(extra: str, purpose: str) -> str:
    """``"<purpose> needs the <extra> extra: pip install 'rlmesh-trio[<extra>]'"``."""
    return f"{purpose} needs the {extra} extra: pip install 'rlmesh-trio[{extra}]'"


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``"scipy.stats"``) or say which extra brings it.

    Raises:
        MissingExtra: ``module`` (or a package it needs) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtra(extra_hint(extra, purpose), extra) from exc
