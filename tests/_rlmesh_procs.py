"""Real rlmesh 0.1.0 servers as subprocesses on loopback, for interop tests.

Usage in a test module::

    from ._rlmesh_procs import RlmeshServers, open_rlmesh_servers

    @pytest.fixture
    def rlmesh_servers() -> Iterator[RlmeshServers]:
        with open_rlmesh_servers() as servers:
            yield servers

    def test_x(rlmesh_servers):
        env = rlmesh_servers.env()          # CartPole via `python -m rlmesh._cli.serve_env`
        lanes = rlmesh_servers.env(lanes=3) # rlmesh.EnvServer([env] * 3)
        vec = rlmesh_servers.env(vector=2)  # SyncVectorEnv, NEXT_STEP
        model = rlmesh_servers.model()      # rlmesh.numpy.Model(cartpole_policy).serve
        env.address                         # "tcp://127.0.0.1:<port>"

(``rlmesh_env``/``rlmesh_model`` are the same as plain context managers.)

Each server binds 127.0.0.1 port 0 and reports its bound address through a
``--ready-fd`` pipe; startup is bounded (``STARTUP_TIMEOUT``) and teardown
terminates, then kills, the process. Skips the test when rlmesh is missing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlmesh_trio.testing import ServerProcess, spawn_server

__all__ = [
    "STARTUP_TIMEOUT",
    "RlmeshProc",
    "RlmeshServers",
    "open_rlmesh_servers",
    "rlmesh_env",
    "rlmesh_model",
]

STARTUP_TIMEOUT = 30.0
_SERVE_SCRIPT = Path(__file__).with_name("_rlmesh_serve.py")


def _require_rlmesh() -> None:
    try:
        import rlmesh  # noqa: F401
    except ImportError:
        pytest.skip("rlmesh 0.1.0 is not installed (interop extra)")


class RlmeshProc(ServerProcess):
    """A running rlmesh server process and the address it bound (``kill`` for
    connection-loss tests, ``stop`` to terminate it)."""

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])


def _start(argv: list[str], what: str) -> RlmeshProc:
    _require_rlmesh()
    env = dict(os.environ, PYTHONWARNINGS="ignore", RLMESH_WORKFLOW_EDITION="2026.06")
    started = spawn_server(argv, what=what, env=env, startup_timeout=STARTUP_TIMEOUT)
    return RlmeshProc(started.process, started.address, what)


@contextlib.contextmanager
def rlmesh_env(
    env_id: str = "CartPole-v1",
    *,
    lanes: int = 0,
    vector: int = 0,
    allow_shutdown: bool = False,
    kwargs_json: str | None = None,
) -> Iterator[RlmeshProc]:
    """Serve an env with rlmesh. A plain gymnasium id uses rlmesh's own CLI
    (``python -m rlmesh._cli.serve_env``, ``kwargs_json`` passed to ``gym.make``);
    lanes, vector envs, the ``failing``/``framed`` envs and remote shutdown go
    through ``_rlmesh_serve.py``."""
    custom = env_id in ("failing", "framed")
    if kwargs_json and (lanes or vector or allow_shutdown or custom):
        raise ValueError("kwargs_json is only supported for the plain rlmesh CLI server")
    if not (lanes or vector or allow_shutdown or custom):
        argv = [sys.executable, "-m", "rlmesh._cli.serve_env", "--env", env_id]
        argv += ["--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
        if kwargs_json:
            argv += ["--kwargs-json", kwargs_json]
    else:
        argv = [sys.executable, str(_SERVE_SCRIPT), "env", "--ready-fd", "{READY_FD}"]
        argv += ["--env-id", env_id, "--lanes", str(lanes), "--vector", str(vector)]
        if allow_shutdown:
            argv.append("--allow-shutdown")
    proc = _start(argv, f"rlmesh env {env_id} lanes={lanes} vector={vector}")
    try:
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def rlmesh_model(policy: str = "cartpole", *, allow_shutdown: bool = False) -> Iterator[RlmeshProc]:
    """Serve ``rlmesh.numpy.Model(<policy>)`` (policies: ``cartpole``, ``angle``, ``failing``).

    Linux only: the model server does not report its port, so the child finds
    it in ``/proc``.
    """
    if not os.path.exists("/proc/self/net/tcp"):
        pytest.skip("serving an rlmesh model on port 0 needs Linux /proc to learn the port")
    argv = [sys.executable, str(_SERVE_SCRIPT), "model", "--ready-fd", "{READY_FD}"]
    argv += ["--policy", policy]
    if allow_shutdown:
        argv.append("--allow-shutdown")
    proc = _start(argv, f"rlmesh model {policy}")
    try:
        yield proc
    finally:
        proc.stop()


class RlmeshServers:
    """Factory handed out by the ``rlmesh_servers`` fixture; stops everything at teardown."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack

    def env(self, env_id: str = "CartPole-v1", **kwargs: object) -> RlmeshProc:
        return self._stack.enter_context(rlmesh_env(env_id, **kwargs))  # type: ignore[arg-type]

    def model(self, policy: str = "cartpole", **kwargs: object) -> RlmeshProc:
        return self._stack.enter_context(rlmesh_model(policy, **kwargs))  # type: ignore[arg-type]


@contextlib.contextmanager
def open_rlmesh_servers() -> Iterator[RlmeshServers]:
    """A server factory; every server it started is stopped on exit."""
    with contextlib.ExitStack() as stack:
        yield RlmeshServers(stack)
