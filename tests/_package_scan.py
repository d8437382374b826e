"""The package's own sources, for tests that scan them with ``ast`` (nothing is imported)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["PACKAGE", "package_modules", "sites_in"]

PACKAGE = Path(__file__).resolve().parents[1] / "rlmesh_trio"

#: What a scan finds in one module's source: (line, what) per site.
Finder = Callable[[str], list[tuple[int, str]]]


def package_modules() -> list[Path]:
    """Every ``.py`` file of the package, relative to it, the generated ``_proto`` left out."""
    return [
        path.relative_to(PACKAGE)
        for path in sorted(PACKAGE.rglob("*.py"))
        if "_proto" not in path.relative_to(PACKAGE).parts
    ]


def sites_in(paths: Iterable[Path], find: Finder) -> list[str]:
    """``rlmesh_trio/<path>:<line>: <what>`` for every site ``find`` reports in ``paths``."""
    return [
        f"rlmesh_trio/{path}:{line}: {what}"
        for path in paths
        for line, what in find((PACKAGE / path).read_text(encoding="utf-8"))
    ]
