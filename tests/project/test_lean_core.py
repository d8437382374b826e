"""The core installs lean: scipy, plotly, PyAV and pygame are extras, and their absence is told.

The absent packages are hidden from a subprocess by a meta-path finder (the one
edge the installed venv cannot produce by itself); the fresh-venv check of the
core alone is .ci/run's first command.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rlmesh_trio import MissingExtra, RlmeshTrioError
from rlmesh_trio._extras import require

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "plotly", "av", "pygame")

_HIDE = """
import importlib.abc, runpy, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {heavy!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Hide())
sys.argv = ["rlmesh-trio", *sys.argv[1:]]
{body}
"""


def _without_heavy(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = _HIDE.format(heavy=set(HEAVY), body=body)
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths), COLUMNS="160"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _without_heavy("from rlmesh_trio.cli import main\nmain()", *args)


def test_the_core_dependencies_hold_no_heavy_part() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for name in HEAVY:
        assert f'"{name}' not in repr(project["dependencies"]), core
    extras = project["optional-dependencies"]
    assert any(d.startswith("scipy") for d in extras["results"])
    assert any(d.startswith("plotly") for d in extras["results"])
    assert any(d.startswith("av") for d in extras["video"])
    assert any(d.startswith("pygame") for d in extras["render"])
    assert "rlmesh-trio[results,video,render]" in extras["all"]


def test_a_missing_module_names_its_extra() -> None:
    with pytest.raises(MissingExtra) as caught:
        require("rlmesh_trio_no_such_module", extra="video", purpose="filming")
    assert str(caught.value) == "filming needs the video extra: pip install 'rlmesh-trio[video]'"
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, RlmeshTrioError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (str(again), again.extra) == (str(caught.value), "video")


def test_importing_the_package_loads_no_heavy_part() -> None:
    result = _without_heavy(
        "import rlmesh_trio, rlmesh_trio.cli\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {set(HEAVY)!r}))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_demo_runs_on_the_core_alone_and_says_what_the_intervals_need(
    tmp_path: Path,
) -> None:
    report = tmp_path / "demo.json"
    result = _cli(
        "demo", "--routes", "1", "--episodes", "2", "--no-progress", "--json", str(report)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "needs the results extra: pip install 'rlmesh-trio[results]'" in result.stdout
    text = report.read_text()
    assert '"statistics": null' in text and '"statistics_note"' in text
    assert '"total_episodes": 2' in text


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("demo", "--routes", "1", "--episodes", "1", "--record", "1"), "video"),
        (("demo", "--routes", "1", "--episodes", "1", "--html", "x.html"), "results"),
        (("compare", "a.json", "b.json"), "results"),
    ],
)
def test_an_option_without_its_extra_is_one_error_line(args: tuple[str, ...], extra: str) -> None:
    result = _cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    line = f"pip install 'rlmesh-trio[{extra}]'"
    assert result.stderr.startswith("error: ") and line in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
