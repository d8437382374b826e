"""Old import paths that keep working for one release, each read with a ``DeprecationWarning``.

A name that moved to its one public home stays readable at the old path
until the release named in :data:`REMOVED_IN`; the warning names the new
home, so the fix is one edited import::

    __getattr__, __dir__ = moved_names(__name__, {"RunReport": "rlmesh_trio"}, __getattr__)
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REMOVED_IN", "moved_names"]

#: The release that drops the old paths.
REMOVED_IN = "0.3"


def moved_names(
    package: str,
    homes: Mapping[str, str],
    fallback: Callable[[str], Any] | None = None,
    listed: Callable[[], list[str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__``/``__dir__`` that serves moved names with a warning.

    Args:
        package: the old module's ``__name__``.
        homes: moved name -> the module that is now its one public home.
        fallback: the module's own ``__getattr__`` (lazy exports) for every other name.
        listed: the module's own ``__dir__``; the moved names are not listed.

    The value is not cached on the old module, so every read warns (``warnings``
    shows each call site once by default).
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if home.rsplit(".", 1)[-1].startswith("_"):
            advice = "it is internal now, with no public replacement"
        else:
            advice = f"import it from {home} ({home}.{name})"
        warnings.warn(
            f"{package}.{name} is deprecated and goes in {REMOVED_IN}; {advice}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        own = listed() if listed is not None else sorted(vars(sys.modules[package]))
        return sorted(set(own))

    return __getattr__, __dir__
