"""The layering contract of pyproject.toml (``[tool.importlinter]``) holds, and is enforced.

``lint-imports`` comes with the dev extra (import-linter). The second test
proves a contract that does not hold is reported as broken, so a green first
test means the contracts were really checked.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports() -> str | None:
    beside = Path(sys.executable).parent / "lint-imports"
    return str(beside) if beside.exists() else shutil.which("lint-imports")


LINT_IMPORTS = _lint_imports()
needs_import_linter = pytest.mark.skipif(
    LINT_IMPORTS is None, reason="import-linter is not installed (dev extra)"
)


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS is not None
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@needs_import_linter
def test_every_layering_contract_is_kept() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in (
        "the package's layers",
        "spaces",
        "runtime never imports",
        "transport never imports",
        "_errors",
    ):
        assert contract in result.stdout


@needs_import_linter
def test_a_broken_contract_fails_the_check(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text(
        "[tool.importlinter]\n"
        'root_packages = ["rlmesh_trio"]\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "runtime without the wire modules (false on purpose)"\n'
        'type = "forbidden"\n'
        'source_modules = ["rlmesh_trio.runtime"]\n'
        'forbidden_modules = ["rlmesh_trio._protocol"]\n'
    )
    # --config: the one spelling every import-linter 2.x accepts (newer ones also take it bare).
    result = _run("--config", str(config))
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
