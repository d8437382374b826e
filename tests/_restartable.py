"""Servers as subprocesses that can be SIGKILLed and restarted on the same port.

Env servers, ours (``rlmesh-trio serve-env``) or rlmesh 0.1.0's
(``python -m rlmesh._cli.serve_env``), or our model server (``serve-model``);
each reports its address on a ``--ready-fd`` pipe, so nothing waits on the clock.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from rlmesh_trio.testing import READY_FD, ServerProcess, spawn_server

__all__ = ["RestartableEnv"]

REPO = Path(__file__).resolve().parents[1]
Kind = Literal["ours", "rlmesh", "our-model"]


class RestartableEnv:
    """One env server; :meth:`kill` SIGKILLs it, :meth:`start` brings it back on its port."""

    def __init__(self, kind: Kind = "ours", env_id: str = "CartPole-v1") -> None:
        self.kind = kind
        self.env_id = env_id
        self.port = 0
        self.proc: ServerProcess | None = None
        self.starts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _argv(self) -> list[str]:
        where = f"127.0.0.1:{self.port}"
        if self.kind == "ours":
            head = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", self.env_id]
        elif self.kind == "our-model":  # env_id names the policy (module:callable)
            head = [sys.executable, "-m", "rlmesh_trio.cli", "serve-model", self.env_id]
        else:
            head = [sys.executable, "-m", "rlmesh._cli.serve_env", "--env", self.env_id]
        return [*head, "--address", where, "--ready-fd", READY_FD]

    def start(self) -> None:
        env = dict(os.environ, PYTHONWARNINGS="ignore", RLMESH_WORKFLOW_EDITION="2026.06")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        )
        self.proc = spawn_server(self._argv(), env=env, cwd=REPO, startup_timeout=60.0)
        self.port = int(self.proc.address.rsplit(":", 1)[1])
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
