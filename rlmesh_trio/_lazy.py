"""Names a package exports but imports on first use (PEP 562), so importing it stays cheap.

A package's ``__init__`` lists where each name lives; the module is imported
when the name is first read (``pkg.Name``, ``from pkg import Name``) and the
value is then kept on the package, so later reads are plain attribute reads::

    if TYPE_CHECKING:  # what type checkers and the docs see
        from ._server import Server
    else:
        __getattr__, __dir__ = lazy_exports(__name__, {"._server": ("Server",)})

The same names go under ``if TYPE_CHECKING:`` as plain imports, so type
checkers and the import graph (the layering contract) still see them;
tests/project/test_import_weight.py checks the two lists agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    attributes: Mapping[str, Iterable[str] | Mapping[str, str]],
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``.

    Args:
        package: the package's ``__name__``.
        attributes: module (relative to ``package``, e.g. ``"._server"``) -> the names read
            from it, or a mapping of exported name -> the module's name for it (a rename).
        submodules: names of the package's own submodules that it exports (``"hooks"``).
    """
    where: dict[str, tuple[str, str] | None] = {name: None for name in submodules}
    for module, names in attributes.items():
        pairs = names.items() if isinstance(names, Mapping) else ((n, n) for n in names)
        for name, source in pairs:
            if name in where:
                raise ValueError(f"{package}: {name!r} is exported twice")
            where[name] = (module, source)

    def __getattr__(name: str) -> Any:
        try:
            found = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        if found is None:
            value: Any = importlib.import_module(f"{package}.{name}")
        else:
            value = getattr(importlib.import_module(found[0], package), found[1])
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
