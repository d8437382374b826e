"""The client side stands on public ground: no private attribute of another library.

An ``x._name`` (not a dunder) is allowed only when ``_name`` is something
``rlmesh_trio`` defines itself (a module, class, function, attribute, slot or
field of ours); ``from pkg._private import ...`` of another package is never
allowed. Found with ``ast``, without importing anything. The servers are
exempt until their rewrite on grpclib's public API lands (another branch).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "rlmesh_trio"
CLIENT_SIDE = (
    "wire/",
    "transport/_address.py",
    "transport/_client.py",
    "transport/_conn.py",
    "transport/_join.py",
    "transport/_handshake.py",
    "transport/_health.py",
    "transport/_remote_base.py",
    "transport/_remote_env.py",
    "transport/_remote_model.py",
    "transport/_replies.py",
    "_endpoints.py",
)


def _modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "_proto" not in p.parts]


#: The grpclib servers still reach into grpclib/h2 (their rewrite is another branch):
#: names they assign do not count as ours.
SERVER_SIDE = {
    "transport/_bridge.py",
    "transport/_env_server.py",
    "transport/_env_workers.py",
    "transport/_h2fast.py",
    "transport/_model_server.py",
    "transport/_serve.py",
    "transport/_serve_model.py",
    "transport/_server_base.py",
}


def _defined_names() -> set[str]:
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*/")}
    for path in _modules():
        if path.relative_to(PACKAGE).as_posix() in SERVER_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # __slots__ entries
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    return names


def _private_sites(source: str, ours: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            if attr.startswith("_") and not attr.startswith("__") and attr not in ours:
                found.append(f"{node.lineno}: .{attr}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            private = any(p.startswith("_") and not p.startswith("__") for p in parts)
            if parts[0] != "rlmesh_trio" and private:
                found.append(f"{node.lineno}: from {node.module}")
    return found


def test_no_private_foreign_attribute_on_the_client_side() -> None:
    ours = _defined_names()
    offenders = []
    for path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(CLIENT_SIDE):
            continue
        offenders += [f"{rel}:{site}" for site in _private_sites(path.read_text("utf-8"), ours)]
    assert offenders == [], "\n".join(offenders)


def test_the_scan_sees_foreign_private_names() -> None:
    ours = {"_ours"}
    assert _private_sites("x._unknown_fields\n", ours) == ["1: ._unknown_fields"]
    assert _private_sites("x._ours\nx.__len__\n", ours) == []
    assert _private_sites("from trio_asyncio._handles import X\n", ours) == [
        "1: from trio_asyncio._handles"
    ]
