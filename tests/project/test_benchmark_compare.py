"""benchmarks/compare_rlmesh.py end to end, smallest settings: it runs, both sides agree.

No speed is asserted (machines are noisy); what is checked is that every case
runs to completion on both sides and that ours and rlmesh's episodes match
seed for seed (the script exits 1 and prints MISMATCH otherwise).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rlmesh")

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_rlmesh.py"


def _bench() -> Any:
    """The scoreboard script as a module (benchmarks/ is not a package)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import compare_rlmesh
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return compare_rlmesh


@pytest.mark.timeout(300)
def test_compare_rlmesh_smallest_run_agrees_with_rlmesh(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    argv = [sys.executable, str(SCRIPT), "--pairs", "1", "--episodes", "1", "--warmup", "0"]
    argv += ["--cases", "1,3,4,5", "--json", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "MISMATCH" not in proc.stdout
    doc = json.loads(out.read_text())
    assert [row["case"] for row in doc["table"]] == ["1", "3", "4", "5 (cpu us/step)"]
    for row in doc["table"]:
        assert float(row["ours"]) > 0 and float(row["theirs"]) > 0
        assert row["met"] in ("yes", "no")
    for key in ("1", "3", "4"):
        case = doc["cases"][key]
        assert case["mismatches"] == []
        for label in ("ours", "theirs"):
            (sample,) = case["sides"][label]
            assert sample["error"] is None
            assert sample["steps"] == 500  # seed 0 with the CartPole rule runs to the 500-step cap


def test_a_fast_wrong_answer_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()

    def sample(episodes: dict[int, tuple[int, float]], wall: float) -> object:
        steps = sum(s for s, _ in episodes.values())
        return bench.Sample(steps, wall, 0.01, episodes)

    right = {0: (500, 500.0), 1: (500, 500.0)}
    wrong = {0: (500, 500.0), 1: (12, 12.0)}  # an early fall: a different policy ran
    ours = bench.Side("ours", lambda: sample(wrong, 0.001))
    theirs = bench.Side("theirs", lambda: sample(right, 1.0))
    case = bench.Case("1", "flag test", [theirs, ours])
    bench._run_case(case, pairs=1, warmup=0)
    out = capsys.readouterr().out
    assert "MISMATCH case 1 ours run 1" in out
    assert "seed 1: (12, 12.0) vs (500, 500.0)" in out
    (row,) = bench._table([case], {"1"})
    assert row[0] == "1" and row[-1] == "MISMATCH"  # fast, but never "met"


def test_neutral_client_case_rows_report_speed_and_server_cpu_ratios() -> None:
    bench = _bench()

    episodes = {0: (500, 500.0)}
    ours = bench.Side("ours", lambda: bench.Sample(500, 1.0, 0.1, episodes, server_cpu_s=0.2))
    theirs = bench.Side("theirs", lambda: bench.Sample(500, 2.0, 0.1, episodes, server_cpu_s=0.4))
    case = bench.Case("9", "neutral client", [ours, theirs])
    bench._run_case(case, pairs=1, warmup=0)
    speed, cpu = bench._table([case], {"9"})
    assert speed == ["9", "500", "250", "2.00", ">= 1.3", "yes"]
    assert cpu == ["9 (server cpu us/step)", "400", "800", "0.50", "<= 0.8x", "yes"]


def test_served_batching_case_reports_its_client_bound_ceiling() -> None:
    bench = _bench()

    episodes = {0: (500, 500.0)}
    # Unbatched: 500 steps in 0.1 s (200 us/step). Batched: 500 steps in 0.05 s, its client
    # busy 0.04 s (80 us/step): batching cannot give more than 200 / 80 = 2.5x here.
    ours = bench.Side("ours", lambda: bench.Sample(500, 0.1, 0.09, episodes))
    batched = bench.Side("ours+batch", lambda: bench.Sample(500, 0.05, 0.04, episodes))
    theirs = bench.Side("theirs", lambda: bench.Sample(500, 0.5, 0.1, episodes))
    case = bench.Case("7", "served batching", [ours, batched, theirs])
    bench._run_case(case, pairs=1, warmup=0)
    _, _, ceiling = bench._table([case], {"7"})
    assert ceiling == ["7 ceiling (client-bound)", "80", "200", "2.50", ">= 2.5", "yes"]
