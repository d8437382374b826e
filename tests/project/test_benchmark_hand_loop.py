"""benchmarks/hand_loop.py end to end, smoke settings: every row prints, the sides agree.

No speed is asserted (machines are noisy). The smoke run (``--quick``: one
round, one 50-step episode per lane) must print every row of the table,
each with a speed or "refused" (shape C, while the tree refuses it), and no
side may disagree with the plain loop's episodes (the script exits 1 then).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "hand_loop.py"
ROWS = ["plain", "sb3", "rlmesh", "async", "A", "A'", "B", "C", "D"]


def _measure() -> Any:
    """benchmarks/_hand_measure.py as a module (benchmarks/ is not a package)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import _hand_measure
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return _hand_measure


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_quick_run_prints_every_row_and_the_sides_agree(tmp_path: Path) -> None:
    pytest.importorskip("rlmesh")
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("psutil")
    out = tmp_path / "hand.json"
    argv = [sys.executable, str(SCRIPT), "--quick", "--json", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "MISMATCH" not in proc.stdout
    doc = json.loads(out.read_text())
    assert [line[0] for line in doc["table"]] == ROWS
    speed, agree = doc["header"].index("steps/s"), doc["header"].index("agree")
    for line in doc["table"]:
        if line[speed] == "refused":
            assert line[0] == "C", line  # only C may be refused today
            continue
        assert float(line[speed]) > 0, line
        assert line[agree] == ("ref" if line[0] == "plain" else "ok"), line
    for key in ROWS:  # the printed table carries every row too
        assert any(text.split()[:1] == [key] for text in proc.stdout.splitlines()), key


def test_a_fast_wrong_answer_is_a_mismatch() -> None:
    measure = _measure()
    right = {0: (500, 500.0), 1: (500, 500.0)}
    wrong = {0: (500, 500.0), 1: (12, 12.0)}  # an early fall: a different policy ran
    reference = measure.Sample(1000, 1.0, list(right.values()), right)
    by_seed = measure.Sample(512, 0.001, list(wrong.values()), wrong)
    assert (
        measure.agreement(reference, by_seed)
        == "1 seeds differ, seed 1: (12, 12.0) vs (500, 500.0)"
    )
    unseeded = measure.Sample(512, 0.001, list(wrong.values()), None)
    assert "multisets differ" in measure.agreement(reference, unseeded)
    reordered = measure.Sample(1000, 1.0, [(500, 500.0), (500, 500.0)], None)
    assert measure.agreement(reference, reordered) is None
