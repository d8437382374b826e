"""asyncio stays on the server side: no client-side module imports asyncio or trio_asyncio.

The clients run on the I/O-free wire core over Trio sockets (issue 13); only
the grpclib servers (and their bridge) may import asyncio. The generated
``_proto`` package (grpclib stubs) is exempt. Imports are found with ``ast``,
so ``import asyncio`` inside a function, ``from asyncio import ...`` and
``import asyncio.events`` all count; a mention in a string or comment does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rlmesh_trio"
#: The server side: grpclib servers, their asyncio bridge and helpers.
ALLOWED = {
    Path("transport/_bridge.py"),
    Path("transport/_server_base.py"),
    Path("transport/_env_server.py"),
    Path("transport/_model_server.py"),
    Path("transport/_serve.py"),
    Path("transport/_serve_model.py"),
    Path("transport/_env_workers.py"),
    Path("transport/_h2fast.py"),
    Path("transport/_channel.py"),
}
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


def test_no_client_side_module_imports_asyncio() -> None:
    modules = _package_modules()
    assert Path("transport/_env_server.py") in modules  # the scan sees the servers
    offenders = [
        f"rlmesh_trio/{path}:{line}: imports {module}"
        for path in modules
        if path not in ALLOWED
        for line, module in forbidden_imports((PACKAGE / path).read_text(encoding="utf-8"))
    ]
    assert offenders == [], "asyncio on the client side:\n" + "\n".join(offenders)


def test_the_bridge_is_where_asyncio_lives() -> None:
    bridge = Path("transport/_bridge.py")
    found = forbidden_imports((PACKAGE / bridge).read_text("utf-8"))
    assert {module.split(".")[0] for _line, module in found} == {"asyncio", "trio_asyncio"}


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


def test_the_wire_core_and_the_clients_import_no_asyncio() -> None:
    client_side = [
        path
        for path in _package_modules()
        if path.parts[0] == "wire"
        or path.name in ("_conn.py", "_client.py", "_join.py", "_remote_env.py", "_remote_model.py")
    ]
    assert Path("wire/_h2core.py") in client_side and Path("transport/_conn.py") in client_side
    for path in client_side:
        assert forbidden_imports((PACKAGE / path).read_text("utf-8")) == [], path
