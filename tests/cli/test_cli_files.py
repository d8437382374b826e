"""Files the user hands ``report``, ``compare`` and ``--ledger`` that are not what they should
be: one ``error:`` line naming the file and what it is not, exit 2, no traceback."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests._cli import run_cli


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr and "session spec" not in stderr
    return lines[0]


def _not_runs(folder: Path) -> dict[str, str]:
    """Files people point ``report`` at by mistake, and what the error must call each."""
    bundle = folder / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("manifest.json", "{}")
    png = folder / "curve.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    blob = folder / "blob.bin"
    blob.write_bytes(bytes(range(128, 256)))
    junk = folder / "junk.json"
    junk.write_text(json.dumps({"routes": [1, "x", None]}))
    bad_episodes = folder / "episodes.json"
    bad_episodes.write_text(json.dumps({"routes": [{"status": "completed", "episodes": 5}]}))
    return {
        str(bundle): "is a zip archive",
        str(png): "is a PNG image",
        str(blob): "is a binary file",
        str(junk): "route entry 0: is a number, not a route object",
        str(bad_episodes): "'episodes' is a number, not a list",
    }


def test_report_names_each_file_that_is_not_a_run(tmp_path: Path) -> None:
    for path, what in _not_runs(tmp_path).items():
        result = run_cli("report", path)
        assert result.returncode == 2, result.stderr
        line = _one_error_line(result.stderr)
        assert path in line and what in line, line


def test_compare_names_the_file_that_is_not_a_run(tmp_path: Path) -> None:
    png = next(p for p, what in _not_runs(tmp_path).items() if "PNG" in what)
    result = run_cli("compare", png, png)
    assert result.returncode == 2
    assert "is a PNG image, not a run's JSON report" in _one_error_line(result.stderr)


@pytest.mark.parametrize("name", ["gone.json", "gone.jsonl"])
def test_a_missing_run_file_is_a_missing_file(tmp_path: Path, name: str) -> None:
    result = run_cli("report", str(tmp_path / name))
    assert result.returncode == 2
    assert _one_error_line(result.stderr).endswith(f"{name}: cannot read: no such file")


def test_a_ledger_on_a_full_disk_says_so(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full (Linux)")
    result = run_cli(
        "run", "--env", "CartPole-v1", "--model", "random", "--episodes", "2",
        "--ledger", "/dev/full", "--no-progress",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "ledger /dev/full: the disk is full" in line
    assert "the ledger is intact up to its last complete line" in line
