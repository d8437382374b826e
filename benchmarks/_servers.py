"""Server subprocesses for the benchmarks: rlmesh 0.1.0's and ours, on 127.0.0.1 port 0.

Each server runs in its own process, so the process being measured holds
only the client side. A server reports its bound address as one line on a
``--ready-fd`` pipe; startup is bounded and :meth:`Server.stop` terminates,
then kills, the process.

Run as a script, this module is the child that serves an rlmesh 0.1.0
numpy model (``Model.serve`` does not report the port it bound, so the child
finds its own listening socket in ``/proc`` and announces it)::

    python benchmarks/_servers.py rlmesh-model --ready-fd N
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlmesh_trio.testing import spawn_server

__all__ = [
    "STARTUP_TIMEOUT",
    "Server",
    "our_env",
    "our_model",
    "rlmesh_env",
    "rlmesh_model",
]

STARTUP_TIMEOUT = 60.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_HERE = Path(__file__).resolve()
_REPO = _HERE.parent.parent
# rlmesh warns on every handshake when no workflow edition is pinned; pin the one both sides speak.
_CHILD_ENV = {"PYTHONWARNINGS": "ignore", "RLMESH_WORKFLOW_EDITION": "2026.06"}


class Server:
    """A running server process and the address it bound."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, what: str) -> None:
        self.process = process
        self.address = address
        self.what = what

    def __repr__(self) -> str:
        return f"Server({self.what!r}, {self.address!r}, pid={self.process.pid})"

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used so far (all its threads; Linux)."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        # After the command name: state is field 3, utime 14 and stime 15 (1-based, man proc).
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def _start(argv: list[str], what: str) -> Server:
    env = dict(os.environ, **_CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    started = spawn_server(argv, what=what, env=env, cwd=_REPO, startup_timeout=STARTUP_TIMEOUT)
    return Server(started.process, started.address, what)


@contextlib.contextmanager
def _serving(argv: list[str], what: str) -> Iterator[Server]:
    server = _start(argv, what)
    try:
        yield server
    finally:
        server.stop()


def rlmesh_env(env_id: str = "CartPole-v1") -> contextlib.AbstractContextManager[Server]:
    """rlmesh 0.1.0's own env server CLI (``python -m rlmesh._cli.serve_env``)."""
    argv = [sys.executable, "-m", "rlmesh._cli.serve_env", "--env", env_id]
    argv += ["--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
    return _serving(argv, f"rlmesh env {env_id}")


def rlmesh_model(kind: str = "rlmesh-model") -> contextlib.AbstractContextManager[Server]:
    """rlmesh 0.1.0 ``rlmesh.numpy.Model.serve`` with the CartPole rule (this file as a child);
    ``kind="rlmesh-mlp"`` serves the MLP of ``_mlp.py`` instead, ``kind="rlmesh-torch"``
    the torch MLP of ``_torch_mlp.py`` as an ``rlmesh.torch.Model``."""
    argv = [sys.executable, str(_HERE), kind, "--ready-fd", "{READY_FD}"]
    return _serving(argv, f"rlmesh model ({kind})")


def rlmesh_envs(
    count: int, env_id: str = "CartPole-v1"
) -> contextlib.AbstractContextManager[Server]:
    """``count`` rlmesh 0.1.0 ``EnvServer`` s in one child process (one thread each);
    its ``address`` is their addresses joined by commas."""
    argv = [sys.executable, str(_HERE), "rlmesh-envs", "--count", str(count), "--env", env_id]
    argv += ["--ready-fd", "{READY_FD}"]
    return _serving(argv, f"{count} rlmesh envs {env_id}")


def our_env(env_id: str = "CartPole-v1") -> contextlib.AbstractContextManager[Server]:
    """Our ``EnvServer`` through the CLI (``rlmesh-trio serve-env``)."""
    argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", env_id]
    argv += ["--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
    return _serving(argv, f"rlmesh-trio env {env_id}")


def our_model(
    policy: str = "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY",
) -> contextlib.AbstractContextManager[Server]:
    """Our ``ModelServer`` through the CLI (``rlmesh-trio serve-model``)."""
    argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-model", policy]
    argv += ["--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
    return _serving(argv, "rlmesh-trio model")


# ---- child: an rlmesh 0.1.0 model server -------------------------------------


def _listening_ports() -> list[int]:
    """TCP ports this process listens on, read from Linux ``/proc``."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in rows.readlines()[1:]:
                fields = row.split()
                if fields[3] == "0A" and fields[9] in inodes:  # state 0A: LISTEN
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _announce_when_listening(ready_fd: int, count: int) -> None:
    """Write the first ``count`` listening addresses (comma-joined) to ``ready_fd``."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        ports = _listening_ports()
        if len(ports) >= count:
            with os.fdopen(ready_fd, "w") as ready:
                ready.write(",".join(f"tcp://127.0.0.1:{p}" for p in ports[:count]) + "\n")
            return
        time.sleep(0.02)
    os._exit(3)


def _serve_rlmesh_envs(ready_fd: int, count: int, env_id: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import gymnasium as gym
    import rlmesh

    servers = [rlmesh.EnvServer(gym.make(env_id), "127.0.0.1:0") for _ in range(count)]
    threads = [threading.Thread(target=s.serve, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    _announce_when_listening(ready_fd, count)
    for thread in threads:
        thread.join()


def _serve_rlmesh_model(ready_fd: int, kind: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import _mlp  # beside this file, which runs as a script here
    import numpy as np
    import rlmesh.numpy as rnp

    class MLP(rnp.Model):  # type: ignore[misc]
        """The MLP of ``_mlp.py``: one row, or one matmul per layer for a batch."""

        def predict(self, obs: Any) -> int:
            return _mlp.act(obs)

        def predict_batch(self, obs: Any) -> Any:
            return _mlp.act_batch(obs)

    class CartPoleRule(rnp.Model):  # type: ignore[misc]
        """``1 if theta + 0.5 * theta_dot > 0 else 0``, per row and batched (float64 math)."""

        def predict(self, obs: Any) -> int:
            return 1 if float(obs[2]) + 0.5 * float(obs[3]) > 0.0 else 0

        def predict_batch(self, obs: Any) -> Any:
            arr = np.asarray(obs, dtype=np.float64)
            return (arr[:, 2] + 0.5 * arr[:, 3] > 0.0).astype(np.int64)

    def announce() -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            ports = _listening_ports()
            if ports:
                with os.fdopen(ready_fd, "w") as ready:
                    ready.write(f"tcp://127.0.0.1:{ports[0]}\n")
                return
            time.sleep(0.02)
        os._exit(3)

    threading.Thread(target=announce, daemon=True).start()
    if kind == "rlmesh-torch":
        _torch_model().serve("127.0.0.1:0")
    (MLP() if kind == "rlmesh-mlp" else CartPoleRule()).serve("127.0.0.1:0")


def _torch_model() -> Any:
    """The torch MLP of ``_torch_mlp.py`` as rlmesh 0.1.0 serves torch models."""
    import _torch_mlp
    import rlmesh.torch as rtorch
    import torch

    class TorchMLP(rtorch.Model):  # type: ignore[misc]
        """Tensors in, tensors out: one row, or one forward for a fused batch."""

        def predict(self, obs: Any) -> Any:
            rows = torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1)
            return int(_torch_mlp.act_tensor(rows)[0])

        def predict_batch(self, obs: Any) -> Any:
            return _torch_mlp.act_tensor(torch.as_tensor(obs, dtype=torch.float32))

    return TorchMLP()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "kind", choices=["rlmesh-model", "rlmesh-mlp", "rlmesh-torch", "rlmesh-envs"]
    )
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--env", default="CartPole-v1")
    args = parser.parse_args()
    if args.kind == "rlmesh-envs":
        _serve_rlmesh_envs(args.ready_fd, args.count, args.env)
    else:
        _serve_rlmesh_model(args.ready_fd, args.kind)


if __name__ == "__main__":
    main()
