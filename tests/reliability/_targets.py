"""The attacked servers: ours or rlmesh 0.1.0's, each in a subprocess of its own.

``RLMESH_TRIO_RELIABILITY_SERVER`` picks the side: ``ours`` (the default, what CI
runs) or ``rlmesh`` (the calibration run: the attacks must meet rlmesh's own
mitigations, which shows they are real). The server's memory is read from
``/proc/<pid>/status`` (``VmRSS``; ``VmHWM``, its peak, is reset through
``clear_refs`` before each attack).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from rlmesh_trio.testing import ServerProcess, spawn_server

from .._rlmesh_procs import rlmesh_env, rlmesh_model

SERVER_ENV_VAR = "RLMESH_TRIO_RELIABILITY_SERVER"
SIDES = ("ours", "rlmesh")
#: The short limits our servers run with here (one place to adjust; ``rt.ServerLimits``).
IDLE_TIMEOUT_S = 1.0
PREFACE_TIMEOUT_S = 1.0
_SCRIPT = Path(__file__).with_name("_server_proc.py")
_REPO = Path(__file__).resolve().parents[2]
_SERVICES = {"env": "rlmesh.env.v1.EnvService", "model": "rlmesh.model.v1.ModelService"}


def side() -> str:
    chosen = os.environ.get(SERVER_ENV_VAR, "ours").strip() or "ours"
    if chosen not in SIDES:
        raise pytest.UsageError(f"{SERVER_ENV_VAR}={chosen!r}: expected one of {SIDES}")
    return chosen


@attrs.frozen
class Target:
    """One attacked server: what it serves, where, and its process."""

    side: str
    kind: str
    process: ServerProcess

    @property
    def port(self) -> int:
        return int(self.process.address.rsplit(":", 1)[1])

    @property
    def address(self) -> str:
        return self.process.address

    @property
    def path(self) -> str:
        """A unary method of the served service (what the attacks' streams ask for)."""
        return f"/{_SERVICES[self.kind]}/Handshake"

    def status_mib(self, field: str) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        raise LookupError(f"{field} not in /proc/{self.process.pid}/status")

    def rss_mib(self) -> float:
        return self.status_mib("VmRSS")

    def peak_mib(self) -> float:
        return self.status_mib("VmHWM")

    def listen_backlog(self) -> int | None:
        """The listening socket's backlog (``ss``'s Send-Q of a LISTEN row), if ``ss`` runs."""
        try:
            rows = subprocess.run(
                ["ss", "-Hltn", f"sport = :{self.port}"], capture_output=True, text=True, timeout=10
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            return None
        return int(rows[2]) if len(rows) > 2 and rows[0] == "LISTEN" else None

    def reset_peak(self) -> None:
        with open(f"/proc/{self.process.pid}/clear_refs", "w") as refs:
            refs.write("5")  # 5: reset the peak RSS (VmHWM) to the current RSS


def limits_available() -> bool:
    import rlmesh_trio as rt

    return hasattr(rt, "ServerLimits")


def _our_server(kind: str) -> ServerProcess:
    argv = [sys.executable, str(_SCRIPT), kind, "--ready-fd", "{READY_FD}"]
    argv += ["--idle-timeout", str(IDLE_TIMEOUT_S), "--preface-timeout", str(PREFACE_TIMEOUT_S)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    return spawn_server(argv, what=f"rlmesh-trio {kind}", env=env, startup_timeout=30)


@contextlib.contextmanager
def serving(kind: str) -> Iterator[Target]:
    """Start the chosen side's ``kind`` server (``env``: CartPole-v1; ``model``: the
    pole-angle policy) on 127.0.0.1 port 0; stop it on exit."""
    chosen = side()
    if chosen == "rlmesh":
        pytest.importorskip("rlmesh")
        with rlmesh_env() if kind == "env" else rlmesh_model("angle") as proc:
            yield Target(chosen, kind, proc)
        return
    with _our_server(kind) as proc:
        yield Target(chosen, kind, proc)
