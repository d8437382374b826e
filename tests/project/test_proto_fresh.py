"""The committed generated code equals a fresh run of ``scripts/gen_proto.py``, byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "rlmesh_trio" / "_proto"
SCRIPT = ROOT / "scripts" / "gen_proto.py"


def _plugin_available() -> bool:
    here = shutil.which("protoc-gen-python_betterproto2", path=str(Path(sys.executable).parent))
    return here is not None or shutil.which("protoc-gen-python_betterproto2") is not None


def _files(root: Path) -> dict[str, bytes]:
    """Every generated file under ``root`` (caches excluded), keyed by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    if not _plugin_available():
        pytest.skip("protoc-gen-python_betterproto2 not found (install the dev extra)")
    try:
        import grpc_tools  # noqa: F401
    except ImportError:
        pytest.skip("grpcio-tools (protoc) not installed (install the dev extra)")
    out = tmp_path / "proto_out"
    # The plugin shells out to `ruff format`: make this interpreter's bin folder findable
    # even when the virtualenv is not activated.
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, f"gen_proto failed:\n{result.stdout}\n{result.stderr}"
    fresh = _files(out)
    committed = _files(COMMITTED)
    assert fresh, "the generator produced no files"
    assert sorted(fresh) == sorted(committed), (
        f"file sets differ: only fresh {sorted(set(fresh) - set(committed))}, "
        f"only committed {sorted(set(committed) - set(fresh))}"
    )
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"regenerate with `python scripts/gen_proto.py`: stale files {stale}"
