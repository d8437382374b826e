"""Fixtures shared by several test files (only those that were repeated)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from ._rlmesh_procs import RlmeshServers, open_rlmesh_servers

# No wall-clock deadline per example: a first example that pays for a lazy import or a
# codec's first build on a loaded CI machine (268 ms once, 0.2 ms after) is not a failure,
# and speed is measured in benchmarks/, never asserted in tests.
settings.register_profile("rlmesh-trio", deadline=None)
settings.load_profile("rlmesh-trio")


@pytest.fixture
def rlmesh_servers() -> Iterator[RlmeshServers]:
    """Real rlmesh 0.1.0 servers as subprocesses on loopback, started on demand, stopped after."""
    with open_rlmesh_servers() as servers:
        yield servers
