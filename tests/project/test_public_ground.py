"""Public ground: rlmesh_trio reads no private attribute of another library.

Issue 13 item 5: a module of ours may read ``x._name`` (not a dunder) only
when ``_name`` is something rlmesh_trio defines itself, and may import
nothing from another package's private module (``from grpclib._x import``,
``import h2._x``) nor a private name out of one (``from h2 import _x``).
``getattr(x, "_name")`` with a literal name counts as a read too.

What we define is collected with ``ast`` over the whole package: functions,
methods and classes named ``_x``, assignments to ``self._x``/``cls._x``/any
``obj._x``, class- and module-level names (attrs fields included),
``__slots__`` entries, and our own private module names. The generated
``_proto`` package is exempt. Nothing is installed or imported: the sources
are only parsed.

Zero sites are allowed, client and server side alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from .._package_scan import PACKAGE, package_modules, sites_in

#: Underscore names that are documented public API: namedtuple's methods and fields
#: (underscored so they cannot clash with field names).
PUBLIC_UNDERSCORE = frozenset({"_asdict", "_fields", "_field_defaults", "_make", "_replace"})

#: The transport's server half: every module of it.
SERVER_DIR = Path("transport/server")


def is_private(name: str) -> bool:
    """``_x`` and ``__x`` (name-mangled) are private; ``__x__`` dunders are not, nor the
    documented :data:`PUBLIC_UNDERSCORE` names."""
    if name in PUBLIC_UNDERSCORE:
        return False
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _unpack(target)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        yield from _unpack(node.target)
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        yield from _unpack(node.target)
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _unpack(item.optional_vars)
    elif isinstance(node, ast.NamedExpr):
        yield node.target


def _unpack(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _unpack(element)
    elif isinstance(target, ast.Starred):
        yield from _unpack(target.value)
    else:
        yield target


def _slots(node: ast.AST) -> Iterator[str]:
    """String entries of a ``__slots__ = (...)`` assignment."""
    if not isinstance(node, ast.Assign):
        return
    if not any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
        return
    values = node.value.elts if isinstance(node.value, ast.Tuple | ast.List) else [node.value]
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            yield value.value


def defined_private_names(tree: ast.AST) -> set[str]:
    """Every private name ``tree`` defines (see the module docstring)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.arg):
            names.add(node.arg)  # keyword arguments such as attrs' private-field aliases
        names.update(_slots(node))
        for target in _targets(node):
            if isinstance(target, ast.Attribute):
                names.add(target.attr)
            elif isinstance(target, ast.Name):
                names.add(target.id)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return {name for name in names if is_private(name)}


def _foreign_module(node: ast.ImportFrom) -> bool:
    return node.level == 0 and bool(node.module) and not str(node.module).startswith("rlmesh_trio")


def foreign_sites(source: str, own: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each private foreign read or import in ``source``."""
    sites: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in own:
            sites.append((node.lineno, f"reads .{node.attr}"))
        elif isinstance(node, ast.Call) and _literal_getattr(node, own):
            sites.append((node.lineno, f"getattr of {_literal_getattr(node, own)!r}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "rlmesh_trio" and any(is_private(p) for p in parts):
                    sites.append((node.lineno, f"imports {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and _foreign_module(node):
            module = str(node.module)
            if any(is_private(part) for part in module.split(".")):
                sites.append((node.lineno, f"imports from {module}"))
            sites += [
                (node.lineno, f"imports {module}.{alias.name}")
                for alias in node.names
                if is_private(alias.name)
            ]
    return sites


def _literal_getattr(node: ast.Call, own: set[str]) -> str | None:
    if not (isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr", "setattr")):
        return None
    if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
        return None
    name = node.args[1].value
    if isinstance(name, str) and is_private(name) and name not in own:
        return name
    return None


def _own_names(paths: Iterable[Path]) -> set[str]:
    own: set[str] = set()
    for path in paths:
        own |= defined_private_names(ast.parse((PACKAGE / path).read_text("utf-8")))
        own.update(part.removesuffix(".py") for part in path.parts if is_private(part))
    return own


def _sites(paths: Iterable[Path], own: set[str]) -> list[str]:
    return sites_in(paths, lambda source: foreign_sites(source, own))


def test_no_module_reads_a_private_name_of_another_library() -> None:
    modules = package_modules()
    assert SERVER_DIR / "_env_server.py" in modules  # the scan sees the servers
    own = _own_names(modules)
    sites = _sites(modules, own)
    assert sites == [], "private foreign sites:\n" + "\n".join(sites)


def test_server_files_have_zero_sites() -> None:
    servers = sorted(path.relative_to(PACKAGE) for path in (PACKAGE / SERVER_DIR).glob("*.py"))
    assert SERVER_DIR / "_env_server.py" in servers
    assert _sites(servers, _own_names(package_modules())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("stream._send_initial_metadata_done\n", ["reads ._send_initial_metadata_done"]),
        ("x = conn._connection.close_connection()\n", ["reads ._connection"]),
        ("getattr(stream, '_stream', None)\n", ["getattr of '_stream'"]),
        ("from grpclib._typing import IServable\n", ["imports from grpclib._typing"]),
        ("import h2._internal\n", ["imports h2._internal"]),
        ("from h2 import _secret\n", ["imports h2._secret"]),
        ("class A:\n    def _mine(self):\n        return self._mine()\n", []),
        ("class A:\n    __slots__ = ('_slot',)\n    def f(self):\n        return self._slot\n", []),
        ("self._field = 1\nother._field\n", []),
        ("x.__dict__\nx.__class__.__name__\n", []),
        ("from . import _bridge\n_bridge.call\n", []),
        ("from rlmesh_trio._protocol import core_pb\n", []),
        ("from __future__ import annotations\n", []),
        ("'stream._hidden'  # obj._hidden\n", []),
        ("point._asdict()\n", []),
    ],
)
def test_the_scan_finds_every_form(source: str, expected: list[str]) -> None:
    own = defined_private_names(ast.parse(source))
    assert [what for _line, what in foreign_sites(source, own)] == expected
