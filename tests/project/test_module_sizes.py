"""The size budget of the house: a module over 500 lines, or a function over 60, needs a reason.

The numbers are a budget, not a wall: past them a piece must say, in one line in
``REASONS`` below, why it reads better whole than split. Never split a piece only
to fit, and never squeeze a docstring to fit.

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

# Each entry: a module path (relative to the repository root) or ``path::qualified.name``
# of a function, with the one-line reason it is over the budget. An entry whose piece
# is back within the budget fails test_every_reason_names_a_current_offender, so the
# list never names what is no longer there.
REASONS: dict[str, str] = {
    "rlmesh_trio/_wire/_client_codec.py": (
        "the client's hot Join codecs share one field-key table, one envelope walker and "
        "the predict encoder whose context encodings the model reply's echo check reads"
    ),
    "rlmesh_trio/orchestrator/_route.py::shard": (
        "a public entry whose docstring states dealing, trials and every Raises in full"
    ),
    "rlmesh_trio/distributed/_api.py::run_distributed": (
        "a public entry whose docstring states sharding, retries and every Raises in full, "
        "and whose one RunOptions call names each setting it takes"
    ),
}


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
    """Every over-size module or function in one module's source, keyed as in REASONS."""
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


def test_every_piece_over_the_budget_gives_its_reason() -> None:
    over = {k: v for k, v in package_offenders().items() if k not in REASONS}
    assert not over, (
        f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function, with "
        f"no reason in REASONS ({__file__}): {over}; give a one-line reason why it reads "
        "better whole, or split it where the design has a seam"
    )


def test_every_reason_names_a_current_offender() -> None:
    stale = sorted(REASONS.keys() - package_offenders().keys())
    assert not stale, f"now within the budget: delete from REASONS in {__file__}: {stale}"


def test_every_reason_is_one_real_line() -> None:
    thin = {k: v for k, v in REASONS.items() if len(v.split()) < 4 or "\n" in v}
    assert not thin, f"a reason is one line of a few words at least: {thin}"


def test_the_checker_catches_long_functions_and_modules() -> None:
    long_method = "class A:\n    async def run(self):\n" + "        x = 1\n" * 60
    assert offenders_in("m.py", long_method) == {"m.py::A.run": 61}
    nested = "def outer():\n    def inner():\n" + "        pass\n" * 59
    assert offenders_in("m.py", nested) == {"m.py::outer": 61}
    assert offenders_in("m.py", "x = 1\n" * 501) == {"m.py": 501}
    assert offenders_in("m.py", "def f():\n" + "    pass\n" * 59) == {}
