"""No asyncio anywhere: no module of the package imports asyncio or trio_asyncio.

The clients run on the I/O-free wire core over Trio sockets (issue 13), and so
do the servers, each on a ``trio.run`` of a thread of its own (issue 22,
``transport/server/_thread.py``). The generated ``_proto`` package is exempt.
Imports are found with ``ast``, so ``import asyncio`` inside a function,
``from asyncio import ...`` and ``import asyncio.events`` all count; a mention
in a string or comment does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .._package_scan import PACKAGE, package_modules, sites_in

SERVER_THREAD = Path("transport/server/_thread.py")
ALLOWED: set[Path] = set()
FORBIDDEN = ("asyncio", "trio_asyncio")


def _is_forbidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN)


def forbidden_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) for every import of asyncio or trio_asyncio in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_forbidden(node.module):
                found.append((node.lineno, node.module))
    return found


def _import_sites(source: str) -> list[tuple[int, str]]:
    return [(line, f"imports {module}") for line, module in forbidden_imports(source)]


def test_only_the_servers_loop_imports_asyncio() -> None:
    modules = package_modules()
    assert Path("transport/server/_env_server.py") in modules  # the scan sees the servers
    offenders = sites_in([path for path in modules if path not in ALLOWED], _import_sites)
    assert offenders == [], "asyncio outside the servers' loop module:\n" + "\n".join(offenders)


def test_the_servers_thread_module_imports_no_asyncio() -> None:
    found = forbidden_imports((PACKAGE / SERVER_THREAD).read_text("utf-8"))
    assert found == []


def test_no_bridge_module_is_left() -> None:
    assert not (PACKAGE / "transport" / "_bridge.py").exists()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import asyncio\n", ["asyncio"]),
        ("import asyncio.events as ev\n", ["asyncio.events"]),
        ("from asyncio import Event\n", ["asyncio"]),
        ("def f():\n    import trio_asyncio\n", ["trio_asyncio"]),
        ("from trio_asyncio import open_loop\n", ["trio_asyncio"]),
        ("from . import asyncio_helpers\n", []),
        ("import asyncio_extras\n", []),
        ("x = 'import asyncio'  # import asyncio\n", []),
    ],
)
def test_the_scan_finds_every_import_form(source: str, expected: list[str]) -> None:
    assert [module for _line, module in forbidden_imports(source)] == expected
