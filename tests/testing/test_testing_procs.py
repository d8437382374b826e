"""rlmesh_trio.testing.spawn_server: server subprocesses that report their address."""

from __future__ import annotations

import sys

import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.testing import READY_FD, spawn_server


async def test_spawned_env_server_serves_and_stops() -> None:
    argv = [
        sys.executable,
        "-m",
        "rlmesh_trio.cli",
        "serve-env",
        "CartPole-v1",
        "--ready-fd",
        READY_FD,
    ]
    with spawn_server(argv, what="our CartPole server") as server:
        assert server.alive() and "127.0.0.1:" in server.address
        assert await rt.check_health(server.address) == "SERVING"
    assert not server.alive()


def test_a_child_that_exits_first_is_reported_with_its_stderr() -> None:
    argv = [
        sys.executable,
        "-c",
        "import sys; sys.stderr.write('no env here'); sys.exit(3)",
        READY_FD,
    ]
    with pytest.raises(RuntimeError, match=r"exited before it was ready:\n.*no env here"):
        spawn_server(argv, what="broken")


def test_a_silent_child_times_out_and_is_killed() -> None:
    # The child's sleep is its whole life (it never writes the ready line), not a wait.
    argv = [sys.executable, "-c", "import time; time.sleep(30)", READY_FD]
    with pytest.raises(RuntimeError, match=r"silent did not become ready in 0\.5s"):
        spawn_server(argv, what="silent", startup_timeout=0.5)


async def test_ready_line_is_read_without_blocking_the_caller_for_long() -> None:
    argv = [
        sys.executable,
        "-c",
        "import os, sys; os.write(int(sys.argv[1]), b'unix:///tmp/x.sock\\n'); "
        "import time; time.sleep(30)",
        READY_FD,
    ]
    with trio.fail_after(10), spawn_server(argv, what="fake") as server:
        assert server.address == "unix:///tmp/x.sock"
