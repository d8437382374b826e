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


def _commands(blocks: list[str]) -> list[str]:
    """Every ``&&``-joined command of the given ```bash blocks, one by one."""
    return [
        part.strip()
        for block in blocks
        for line in block.splitlines()
        for part in line.split("&&")
        if part.strip()
    ]


def test_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link


def test_readme_set_up_commands_are_what_ci_runs() -> None:
    """The first two bash blocks (set up, test) are exactly .ci/run's commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_commands = {line.replace("--quiet ", "").strip() for line in ci.splitlines()}
    commands = _commands(re.findall(r"```bash\n(.*?)```", readme, flags=re.S)[:2])
    assert "rlmesh-trio demo --routes 2 --episodes 2" in commands
    assert "python -m pytest" in commands
    for command in commands:
        assert command in ci_commands, f"README runs {command!r}, .ci/run does not"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_install_page_runs_the_readme_test_commands() -> None:
    """The test commands of docs/guide/install.md are the README's, extras and all."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "guide" / "install.md").read_text(encoding="utf-8")
    readme_tests = _bash_blocks(readme)[1]
    assert "python -m pytest" in readme_tests
    section = page.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    assert _bash_blocks(section) == [readme_tests]
