"""asyncio stays confined: only ``transport/_bridge.py`` (the client side) and
``transport/_server_loop.py`` (the servers' plain asyncio loops) import asyncio,
and only the bridge imports trio_asyncio.

Issue 5 asks that nothing else in the package imports asyncio; asyncio-side
transport code uses the primitives ``_bridge`` re-exports. The generated
``_proto`` package (grpclib stubs) is exempt. Imports are found with ``ast``,
so ``import asyncio`` inside a function, ``from asyncio import ...`` and
``import asyncio.events`` all count; a mention in a string or comment does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rlmesh_trio"
BRIDGE = Path("transport/_bridge.py")
SERVER_LOOP = Path("transport/_server_loop.py")
ALLOWED = {BRIDGE, SERVER_LOOP}
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


def _package_modules() -> list[Path]:
    return [
        path.relative_to(PACKAGE)
        for path in sorted(PACKAGE.rglob("*.py"))
        if "_proto" not in path.relative_to(PACKAGE).parts
    ]


def test_only_the_bridge_imports_asyncio() -> None:
    modules = _package_modules()
    assert Path("transport/_env_server.py") in modules  # the scan sees the servers
    offenders = [
        f"rlmesh_trio/{path}:{line}: imports {module}"
        for path in modules
        if path not in ALLOWED
        for line, module in forbidden_imports((PACKAGE / path).read_text(encoding="utf-8"))
    ]
    assert offenders == [], "asyncio outside the bridge:\n" + "\n".join(offenders)


def test_the_bridge_is_where_asyncio_lives() -> None:
    bridge = BRIDGE
    found = forbidden_imports((PACKAGE / bridge).read_text("utf-8"))
    assert {module.split(".")[0] for _line, module in found} == {"asyncio", "trio_asyncio"}


def test_the_servers_loop_is_plain_asyncio_without_trio_asyncio() -> None:
    found = forbidden_imports((PACKAGE / SERVER_LOOP).read_text("utf-8"))
    assert {module.split(".")[0] for _line, module in found} == {"asyncio"}


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


SERVER_MODULES = (
    "_server_base.py",
    "_server_loop.py",
    "_server_net.py",
    "_server_sync.py",
    "_server_trio.py",
    "_env_server.py",
    "_env_join.py",
    "_env_workers.py",
    "_model_server.py",
    "_model_join.py",
    "_serve.py",
    "_serve_model.py",
)


def _imports_bridge(source: str) -> bool:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = {alias.name for alias in node.names}
            if (node.module or "").endswith("_bridge") or "_bridge" in names:
                return True
        elif isinstance(node, ast.Import) and any(a.name.endswith("._bridge") for a in node.names):
            return True
    return False


def test_servers_need_neither_the_bridge_nor_trio_asyncio() -> None:
    # The servers run on plain asyncio loops of their own threads (_server_loop).
    offenders = [
        name
        for name in SERVER_MODULES
        if _imports_bridge((PACKAGE / "transport" / name).read_text("utf-8"))
        or any(
            module.startswith("trio_asyncio")
            for _line, module in forbidden_imports(
                (PACKAGE / "transport" / name).read_text("utf-8")
            )
        )
    ]
    assert offenders == []
