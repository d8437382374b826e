"""Regenerate ``rlmesh_trio/_proto`` from the wire-v1 ``.proto`` files in ``proto/``.

Usage: ``python scripts/gen_proto.py [OUTPUT_DIR]`` (default: ``rlmesh_trio/_proto``).

protoc comes from grpcio-tools and the code generator is the betterproto2
plugin: dataclass messages only (no service stubs, so the package needs no
grpclib; the tests keep their own grpclib stubs in ``tests/_grpc_services.py``).
The output is committed; ``tests/project/test_proto_fresh.py`` regenerates into a
temporary folder and fails when anything differs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
DEFAULT_OUT = ROOT / "rlmesh_trio" / "_proto"
PLUGIN_OPTIONS = "client_generation=none,server_generation=none"


def proto_files() -> list[Path]:
    return sorted(PROTO_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Write freshly generated modules to ``out_dir``, replacing what is there."""
    plugin = shutil.which("protoc-gen-python_betterproto2", path=str(Path(sys.executable).parent))
    if plugin is None:
        plugin = shutil.which("protoc-gen-python_betterproto2")
    if plugin is None:
        raise SystemExit(
            "protoc-gen-python_betterproto2 not found: pip install betterproto2-compiler"
        )
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={PROTO_DIR}",
            f"--plugin=protoc-gen-python_betterproto2={plugin}",
            f"--python_betterproto2_out={tmp}",
            f"--python_betterproto2_opt={PLUGIN_OPTIONS}",
            *[str(p.relative_to(PROTO_DIR)) for p in proto_files()],
        ]
        # The plugin formats its output with `ruff format`, which reads the ruff
        # config of its working directory; run it from the empty temporary folder
        # so the output does not depend on where this script is started.
        subprocess.run(cmd, check=True, cwd=tmp)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        shutil.copytree(tmp, out_dir)


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    generate(out)
    print(f"generated {sum(1 for _ in out.rglob('*.py'))} modules into {out}")


if __name__ == "__main__":
    main(sys.argv)
