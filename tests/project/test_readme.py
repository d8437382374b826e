"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    script = tmp_path / "readme_example.py"
    script.write_text(blocks[0], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    episodes, mean_reward, _rate = result.stdout.split()
    assert episodes == "6"
    assert float(mean_reward) > 100
