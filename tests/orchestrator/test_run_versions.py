"""``run.versions`` (reports and ledger headers) records what a run stands on, and only that."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from rlmesh_trio.orchestrator._durable import package_versions

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return match.group(0).lower().replace("_", "-")


def _runtime_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    direct = {_name(req) for req in project["dependencies"]}
    # h2 drives hpack (header compression), which the wire core also imports directly.
    nested = {_name(req) for req in metadata.requires("h2") or [] if "extra ==" not in req}
    return direct | nested


def test_versions_record_the_wire_stack() -> None:
    versions = package_versions()
    for name in ("python", "rlmesh-trio", "trio", "h2", "hpack", "betterproto2"):
        assert name in versions, name
    assert versions["h2"] == metadata.version("h2")
    assert versions["betterproto2"] == metadata.version("betterproto2")


def test_versions_record_no_test_only_package() -> None:
    recorded = set(package_versions()) - {"python", "rlmesh-trio"}
    # rlmesh (the interop extra) is recorded when installed: runs may drive its servers.
    extra = recorded - _runtime_dependencies() - {"rlmesh"}
    assert extra == set(), f"recorded but not a runtime dependency: {sorted(extra)}"
    assert "grpclib" not in recorded
