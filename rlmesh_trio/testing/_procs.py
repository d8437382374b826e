"""Server subprocesses for tests and benchmarks: start one, learn its address, stop it.

Both our CLI (``rlmesh-trio serve-env ... --ready-fd N``) and rlmesh's
(``python -m rlmesh._cli.serve_env ... --ready-fd N``) write the bound
address as one line to a file descriptor once they accept connections, so a
test never has to guess a port or sleep.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["READY_FD", "ServerProcess", "spawn_server"]

#: Placeholder in ``argv`` replaced by the number of the ready pipe's write end.
READY_FD = "{READY_FD}"


class ServerProcess:
    """A running server process and the address it reported. A context manager that stops it."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, what: str) -> None:
        self.process = process
        self.address = address
        self.what = what

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.what!r}, {self.address!r}, pid={self.process.pid})"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the process (no goodbye on the wire) and reap it."""
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after ``timeout`` seconds."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _drain(stream: IO[bytes]) -> None:
    with contextlib.suppress(Exception):
        while stream.read(65536):
            pass


def spawn_server(
    argv: Sequence[str],
    *,
    what: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    startup_timeout: float = 30.0,
) -> ServerProcess:
    """Start ``argv`` and wait for the address it writes to the ready pipe.

    Every ``"{READY_FD}"`` in ``argv`` is replaced by the pipe's descriptor
    number. ``env`` is the child's whole environment (default: ours). Raises
    ``RuntimeError`` with the tail of the child's stderr if it exits first,
    or if it is not ready within ``startup_timeout`` seconds (the child is
    killed). Once ready, stderr is drained in the background so a chatty
    server can never block on a full pipe.
    """
    what = what or " ".join(argv[:4])
    read_fd, write_fd = os.pipe()
    args = [a.replace(READY_FD, str(write_fd)) for a in argv]
    process = subprocess.Popen(
        args,
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    os.close(write_fd)
    deadline = time.monotonic() + startup_timeout
    line = b""
    try:
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"{what} did not become ready in {startup_timeout}s")
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 256)
            if not chunk:
                process.wait(timeout=10)
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise RuntimeError(f"{what} exited before it was ready:\n{err[-2000:]}")
            line += chunk
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        raise
    finally:
        os.close(read_fd)
    if process.stderr is not None:
        threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
    return ServerProcess(process, line.decode().strip(), what)
