"""One home per public name, and the old paths that warn for one release (issue 35 item 5).

Every name of ``rt.__all__`` and of each public subpackage's ``__all__`` (and of an
exported module such as ``rt.hooks.events``) is exported from exactly one place. A
name that moved keeps its old path until ``rlmesh_trio._deprecated.REMOVED_IN``: the
read warns (``DeprecationWarning`` naming the home) and gives the very object the
home gives. The table of moved names is ``rlmesh_trio._deprecated.MOVED``, and
docs/deprecated.md lists it for people.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import types
from collections import defaultdict
from pathlib import Path

import pytest

import rlmesh_trio
from rlmesh_trio import _wire
from rlmesh_trio._deprecated import MOVED, REMOVED_IN

ROOT = Path(__file__).resolve().parents[2]

#: The public subpackages: each has an ``__all__`` (maybe empty) and imports without a warning.
PUBLIC = [
    "rlmesh_trio.cli",
    "rlmesh_trio.dashboard",
    "rlmesh_trio.distributed",
    "rlmesh_trio.hooks",
    "rlmesh_trio.inprocess",
    "rlmesh_trio.orchestrator",
    "rlmesh_trio.report",
    "rlmesh_trio.results",
    "rlmesh_trio.runtime",
    "rlmesh_trio.spaces",
    "rlmesh_trio.testing",
    "rlmesh_trio.transport",
]
#: Packages kept only as an old path: nothing of theirs is public.
OLD_ONLY = ["rlmesh_trio.wire"]

MOVES = sorted((old, name, home) for old, homes in MOVED.items() for name, home in homes.items())


def _exports() -> dict[str, list[str]]:
    """Public name -> every module whose ``__all__`` lists it (exported modules included)."""
    where: dict[str, list[str]] = defaultdict(list)
    for package in ["rlmesh_trio", *PUBLIC]:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) and value.__name__ in PUBLIC:
                continue  # rt.hooks is the package itself, counted as its own place
            where[name].append(package)
            if isinstance(value, types.ModuleType):
                for inner in value.__all__:
                    where[inner].append(value.__name__)
    return where


def test_every_public_name_has_exactly_one_home() -> None:
    twice = {name: places for name, places in _exports().items() if len(places) > 1}
    assert not twice, f"exported from more than one place: {twice}"


def test_every_public_object_has_exactly_one_home() -> None:
    """The same class, function or module is not exported under a second name either."""
    seen: dict[int, str] = {}
    clashes = []
    for name, (place,) in _exports().items():
        value = getattr(importlib.import_module(place), name)
        if not isinstance(value, type | types.FunctionType | types.ModuleType):
            continue  # constants (strings, numbers) may be equal by chance
        if id(value) in seen:
            clashes.append((seen[id(value)], f"{place}.{name}"))
        seen[id(value)] = f"{place}.{name}"
    assert not clashes


def test_the_public_subpackages_are_the_listed_ones() -> None:
    """A new subpackage is either public (in PUBLIC) or private (a leading underscore)."""
    found = sorted(
        f"rlmesh_trio.{p.parent.name}"
        for p in (ROOT / "rlmesh_trio").glob("*/__init__.py")
        if not p.parent.name.startswith("_")
    )
    assert found == sorted(PUBLIC + OLD_ONLY)
    assert "wire" not in rlmesh_trio.__all__
    assert "wire" not in dir(rlmesh_trio)


@pytest.mark.parametrize("package", OLD_ONLY)
def test_an_old_only_package_lists_nothing_and_refuses_unknown_names(package: str) -> None:
    old = importlib.import_module(package)
    assert old.__all__ == []
    assert dir(old) == sorted(old.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = old.nope


@pytest.mark.parametrize(("old", "name", "home"), MOVES)
def test_an_old_path_warns_naming_the_home_and_gives_the_same_object(
    old: str, name: str, home: str
) -> None:
    module = importlib.import_module(old)
    if old == "rlmesh_trio.runtime" and name == "events":
        # Importing the old ``rlmesh_trio.runtime.events`` module (its own rows below) sets
        # it on the package, where it then reads without a warning; its names still warn.
        vars(module).pop("events", None)
    assert name not in module.__all__
    assert name not in dir(module)
    if home.rsplit(".", 1)[-1].startswith("_"):
        advice = "it is internal now, with no public replacement"
    else:
        advice = f"import it from {home} ({home}.{name})"
    message = f"{old}.{name} is deprecated and goes in {REMOVED_IN}; {advice}"
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(home), name)


def test_a_from_import_of_an_old_path_warns_at_the_importing_line() -> None:
    with pytest.warns(DeprecationWarning, match=r"import it from rlmesh_trio \(") as caught:
        from rlmesh_trio.orchestrator import run  # noqa: F401
    assert caught[0].filename == __file__


def test_the_old_wire_core_names_are_internal() -> None:
    old = importlib.import_module("rlmesh_trio.wire")
    with pytest.warns(DeprecationWarning, match=r"rlmesh_trio\.wire\.ClientCore .*internal"):
        assert old.ClientCore is _wire.ClientCore


def test_importing_the_package_and_every_public_subpackage_warns_nothing() -> None:
    """In a fresh interpreter, with every warning an error: the imports, and a star import
    of each (so every name of every ``__all__`` is read from its home)."""
    code = "import rlmesh_trio\n" + "".join(f"from {p} import *\n" for p in PUBLIC)
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_docs_list_every_old_path() -> None:
    """docs/deprecated.md: one row per old package and home, naming exactly its moved names."""
    rows: dict[tuple[str, str], set[str]] = {}
    for line in (ROOT / "docs" / "deprecated.md").read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        old, names, home = cells
        key = (old.strip("`"), re.findall(r"`([^`]+)`", home)[0])
        rows[key] = set(re.findall(r"`([^`]+)`", names))
    expected: dict[tuple[str, str], set[str]] = defaultdict(set)
    for old, name, home in MOVES:
        expected[(old, home)].add(name)
    assert rows == expected
    assert f"release {REMOVED_IN}" in (ROOT / "docs" / "deprecated.md").read_text("utf-8")
