"""Instructions per step of the env + model servers under callgrind, driven as in case 9.

On a shared, loaded machine CPU time per step swings by tens of percent from
one run to the next; the count of user-space instructions does not. Each
server runs under ``valgrind --tool=callgrind`` with instrumentation off,
rlmesh 0.1.0's runtime (``rlmesh.run`` with a ``RemoteModel``, as in case 9
of ``compare_rlmesh.py``) warms them up, then instrumentation is switched on
for the measured episodes only. Needs valgrind (``apt-get install valgrind``)
and the ``interop`` extra::

    python benchmarks/server_instructions.py [--episodes 2] [--side ours|theirs] [--keep DIR]

Kernel time is not counted (system calls, context switches): compare sides
on CPU time (``compare_rlmesh.py``) and one side's versions on instructions.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402

_HERE = Path(__file__).resolve().parent
_POLICY = "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY"
#: Python under callgrind starts some fifty times slower.
_STARTUP = 600.0


def _argv(side: str, kind: str) -> list[str]:
    ready = ["--ready-fd", "{READY_FD}"]
    if side == "theirs" and kind == "env":
        return [
            "-m",
            "rlmesh._cli.serve_env",
            "--env",
            "CartPole-v1",
            "--address",
            "127.0.0.1:0",
            *ready,
        ]
    if side == "theirs":
        return [str(_HERE / "_servers.py"), "rlmesh-model", *ready]
    target = ["serve-env", "CartPole-v1"] if kind == "env" else ["serve-model", _POLICY]
    return ["-m", "rlmesh_trio.cli", *target, "--address", "127.0.0.1:0", *ready]


def _start(side: str, kind: str, out: Path) -> _servers.Server:
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    valgrind += [f"--callgrind-out-file={out}", sys.executable]
    _servers.STARTUP_TIMEOUT = _STARTUP
    return _servers._start(valgrind + _argv(side, kind), f"{side} {kind} under callgrind")


def _instrument(server: _servers.Server, on: bool) -> None:
    command = ["callgrind_control", "-i", "on" if on else "off", str(server.process.pid)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def _total(out: Path) -> int:
    """The instructions a callgrind output file counted (its ``totals:`` line; the
    ``summary:`` line stays 0 when instrumentation starts off)."""
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    return 0


def _stop(server: _servers.Server) -> None:
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--side", choices=["ours", "theirs"], default="ours")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the callgrind files here (for callgrind_annotate)"
    )
    args = parser.parse_args()
    import rlmesh

    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        outs = {kind: Path(tmp, f"{kind}.callgrind") for kind in ("env", "model")}
        servers = {kind: _start(args.side, kind, out) for kind, out in outs.items()}
        env, model = servers["env"], servers["model"]
        try:
            rlmesh.run(rlmesh.RemoteModel(model.address), env.address, seeds=[100, 101])
            for server in servers.values():
                _instrument(server, True)
            seeds = list(range(args.episodes))
            result = rlmesh.run(rlmesh.RemoteModel(model.address), env.address, seeds=seeds)
            for server in servers.values():
                _instrument(server, False)
        finally:
            for server in servers.values():
                _stop(server)
        steps = int(result.total_steps)
        print(f"{args.side} servers, {steps} steps (rlmesh.run, CartPole-v1):")
        for kind, out in outs.items():
            print(f"  {kind:5}  {_total(out) / steps:>10,.0f} instructions/step")


if __name__ == "__main__":
    main()
