"""docs/architecture.md stays true: every path it names exists, and it stays one page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

# A code span that starts with one of our top-level folders is a path claim.
_PATH = re.compile(
    r"`((?:rlmesh_trio|tests|proto|scripts|benchmarks|examples|docs)(?:/[\w.\-]*)*)`"
)


def named_paths(text: str) -> list[str]:
    return sorted(set(_PATH.findall(text)))


def test_the_doc_names_paths_at_all() -> None:
    paths = named_paths(DOC.read_text())
    assert "rlmesh_trio/runtime/_timer.py" in paths
    assert len(paths) > 20


def test_every_module_path_the_doc_names_exists() -> None:
    missing = [p for p in named_paths(DOC.read_text()) if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_path_pattern_catches_a_missing_module() -> None:
    assert named_paths("see `rlmesh_trio/runtime/_gone.py` and `x/y.py`") == [
        "rlmesh_trio/runtime/_gone.py"
    ]


def test_it_stays_about_one_page() -> None:
    # A map and one step traced end to end (served, in process, a block): short enough
    # to read in one sitting.
    assert len(DOC.read_text().splitlines()) <= 150
