"""The size rules of the house (issue 14): no module over 500 lines, no function over 60.

Every ``.py`` under ``rlmesh_trio/`` counts except the generated ``rlmesh_trio/_proto``.
A module's size is its line count; a function's (methods and nested functions
included) runs from its ``def`` line to its last line, decorators left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rlmesh_trio"
GENERATED = PACKAGE / "_proto"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60

# Offenders that other branches are splitting right now. Each entry is a module
# path (relative to the repository root) or ``path::qualified.name`` of a
# function. When a branch that fixes one lands, delete its entry here:
# test_the_allowlist_names_only_current_offenders fails until you do, so this
# list only ever shrinks. Do not add new entries; split the code instead.
ALLOWLIST: frozenset[str] = frozenset()  # empty: every module and function is within the limits


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, line count) of every function in ``tree``, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            assert node.end_lineno is not None
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def offenders_in(label: str, source: str) -> dict[str, int]:
    """Every over-size module or function in one module's source, keyed as in ALLOWLIST."""
    found: dict[str, int] = {}
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found[label] = lines
    for name, size in _functions(ast.parse(source, filename=label)):
        if size > MAX_FUNCTION_LINES:
            found[f"{label}::{name}"] = size
    return found


def package_offenders() -> dict[str, int]:
    """Every over-size module or function under rlmesh_trio/, the generated code left out."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(GENERATED):
            continue
        label = path.relative_to(ROOT).as_posix()
        found.update(offenders_in(label, path.read_text(encoding="utf-8")))
    return found


def test_no_module_or_function_is_over_the_limits() -> None:
    over = {k: v for k, v in package_offenders().items() if k not in ALLOWLIST}
    assert not over, (
        f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function "
        f"(split them): {over}"
    )


def test_the_allowlist_names_only_current_offenders() -> None:
    stale = sorted(ALLOWLIST - package_offenders().keys())
    assert not stale, f"now within the limits: delete from ALLOWLIST in {__file__}: {stale}"


def test_the_checker_catches_long_functions_and_modules() -> None:
    long_method = "class A:\n    async def run(self):\n" + "        x = 1\n" * 60
    assert offenders_in("m.py", long_method) == {"m.py::A.run": 61}
    nested = "def outer():\n    def inner():\n" + "        pass\n" * 59
    assert offenders_in("m.py", nested) == {"m.py::outer": 61}
    assert offenders_in("m.py", "x = 1\n" * 501) == {"m.py": 501}
    assert offenders_in("m.py", "def f():\n" + "    pass\n" * 59) == {}
