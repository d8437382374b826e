"""Fixtures shared by several test files (only those that were repeated)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._rlmesh_procs import RlmeshServers, open_rlmesh_servers


@pytest.fixture
def rlmesh_servers() -> Iterator[RlmeshServers]:
    """Real rlmesh 0.1.0 servers as subprocesses on loopback, started on demand, stopped after."""
    with open_rlmesh_servers() as servers:
        yield servers
