"""Server subprocesses for the fault tests: ours (the CLI) and the misbehaving one.

Every process binds 127.0.0.1 port 0 and reports its address on a
``--ready-fd`` pipe; startup is bounded by ``STARTUP_TIMEOUT`` and teardown
is a SIGKILL (these servers are often stalled on purpose, and a graceful stop
would wait out their drain timeouts).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from rlmesh_trio.testing import ServerProcess, spawn_server

__all__ = ["REPO", "STARTUP_TIMEOUT", "ServerProc", "faulty_server", "our_env", "our_model"]

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 30.0
_FAULTY = Path(__file__).with_name("_faults_server.py")


class ServerProc(ServerProcess):
    """A running server process, the address it reported, and the log a misbehaving
    server writes (``kill`` SIGKILLs it: no goodbye on the wire)."""

    def __init__(
        self, process: subprocess.Popen[bytes], address: str, what: str, log: Path | None
    ) -> None:
        super().__init__(process, address, what)
        self.log = log

    def events(self) -> list[str]:
        """What the misbehaving server logged (one word per RPC or Join message)."""
        if self.log is None or not self.log.exists():
            return []
        return self.log.read_text().split()


def _spawn(argv: list[str], what: str, env: dict[str, str], log: Path | None) -> ServerProc:
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **env)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    started = spawn_server(argv, what=what, env=full_env, cwd=REPO, startup_timeout=STARTUP_TIMEOUT)
    return ServerProc(started.process, started.address, what, log)


@contextlib.contextmanager
def _running(proc: ServerProc) -> Iterator[ServerProc]:
    try:
        yield proc
    finally:
        proc.kill()
        if proc.process.stderr is not None:
            proc.process.stderr.close()


_CLI = [sys.executable, "-m", "rlmesh_trio.cli"]


@contextlib.contextmanager
def our_env(target: str = "CartPole-v1", *args: str, **env: str) -> Iterator[ServerProc]:
    """``rlmesh-trio serve-env TARGET`` (``env`` sets environment variables of the process)."""
    argv = [*_CLI, "serve-env", target, *args, "--ready-fd", "{READY_FD}"]
    with _running(_spawn(argv, f"serve-env {target}", env, None)) as proc:
        yield proc


@contextlib.contextmanager
def our_model(
    target: str = "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY", *args: str, **env: str
) -> Iterator[ServerProc]:
    """``rlmesh-trio serve-model TARGET``."""
    argv = [*_CLI, "serve-model", target, *args, "--ready-fd", "{READY_FD}"]
    with _running(_spawn(argv, f"serve-model {target}", env, None)) as proc:
        yield proc


@contextlib.contextmanager
def faulty_server(mode: str, log: Path) -> Iterator[ServerProc]:
    """``tests/_faults_server.py MODE`` logging to ``log``."""
    argv = [sys.executable, str(_FAULTY), mode, "--ready-fd", "{READY_FD}", "--log", str(log)]
    with _running(_spawn(argv, f"faulty {mode}", {}, log)) as proc:
        yield proc
