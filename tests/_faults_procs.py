"""Server subprocesses for the fault tests: ours (the CLI) and the misbehaving one.

Every process binds 127.0.0.1 port 0 and reports its address on a
``--ready-fd`` pipe; startup is bounded by ``STARTUP_TIMEOUT`` and teardown
is a SIGKILL (these servers are often stalled on purpose, and a graceful stop
would wait out their drain timeouts).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["REPO", "STARTUP_TIMEOUT", "ServerProc", "faulty_server", "our_env", "our_model"]

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT = 30.0
_FAULTY = Path(__file__).with_name("_faults_server.py")


class ServerProc:
    """A running server process and the address it reported."""

    def __init__(
        self, process: subprocess.Popen[bytes], address: str, what: str, log: Path | None
    ) -> None:
        self.process = process
        self.address = address
        self.what = what
        self.log = log

    def __repr__(self) -> str:
        return f"ServerProc({self.what!r}, {self.address!r}, pid={self.process.pid})"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the process (no goodbye on the wire) and reap it."""
        if self.alive():
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def events(self) -> list[str]:
        """What the misbehaving server logged (one word per RPC or Join message)."""
        if self.log is None or not self.log.exists():
            return []
        return self.log.read_text().split()


def _spawn(argv: list[str], what: str, env: dict[str, str], log: Path | None) -> ServerProc:
    read_fd, write_fd = os.pipe()
    argv = [a.replace("{READY_FD}", str(write_fd)) for a in argv]
    full_env = dict(os.environ, PYTHONWARNINGS="ignore", **env)
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    process = subprocess.Popen(
        argv,
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=REPO,
    )
    os.close(write_fd)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    line = b""
    try:
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"{what} did not become ready in {STARTUP_TIMEOUT}s")
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 256)
            if not chunk:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise RuntimeError(f"{what} exited before it was ready:\n{err[-2000:]}")
            line += chunk
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise
    finally:
        os.close(read_fd)
    return ServerProc(process, line.decode().strip(), what, log)


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
    target: str = "rlmesh_trio._demo_policy:CARTPOLE_POLICY", *args: str, **env: str
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
