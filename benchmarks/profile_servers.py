"""Profile OUR env and model servers (case 4 of ``compare_rlmesh.py``) under pyinstrument.

Each server runs as ``python -m pyinstrument ... -m rlmesh_trio.cli serve-...``
in its own process; our runtime drives one route against them from this
process; the servers are then stopped with SIGINT (so pyinstrument writes
its session) and each profile is summarised by area and by function, per
step. Needs ``pip install pyinstrument`` (not a project dependency)::

    python benchmarks/profile_servers.py [--episodes 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import rlmesh_trio as rt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402
from profile_hot_path import _print_areas, _print_functions, _pyinstrument_areas  # noqa: E402


def _profiled(kind: str, target: str, out: Path, interval: float) -> _servers.Server:
    argv = [sys.executable, "-m", "pyinstrument", "--interval", str(interval)]
    argv += ["-r", "pyisession", "-o", str(out), "-m", "rlmesh_trio.cli", kind, target]
    argv += ["--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
    return _servers._start(argv, f"profiled {kind}")


def _stop(server: _servers.Server) -> None:
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--interval", type=float, default=0.0005)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    from pyinstrument.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        env_out, model_out = Path(tmp, "env.pyisession"), Path(tmp, "model.pyisession")
        env = _profiled("serve-env", "CartPole-v1", env_out, args.interval)
        model = _profiled(
            "serve-model",
            "rlmesh_trio.inprocess._demo_policy:CARTPOLE_POLICY",
            model_out,
            args.interval,
        )
        try:
            wall0 = time.perf_counter()
            cpu0 = env.cpu_seconds() + model.cpu_seconds()
            report = rt.run(
                [rt.Route(env=env.address, model=model.address, seeds=range(args.episodes))]
            )
            wall = time.perf_counter() - wall0
            cpu = env.cpu_seconds() + model.cpu_seconds() - cpu0
        finally:
            _stop(env)
            _stop(model)
        steps = report.total_steps
        print(
            f"{steps} steps, {steps / wall:.0f} steps/s, servers' CPU {cpu / steps * 1e6:.0f} "
            "us/step (profiler overhead included)"
        )
        for name, out in (("env server", env_out), ("model server", model_out)):
            if not out.exists():
                print(f"\n{name}: no profile written")
                continue
            session = Session.load(str(out))
            root = session.root_frame(trim_stem=False)
            totals: dict[str, float] = {}
            by_function: dict[str, float] = {}
            if root is not None:
                _pyinstrument_areas(root, totals, by_function)
            print(f"\n===== {name} =====")
            _print_functions(by_function, steps, args.top)
            _print_areas(totals, steps)


if __name__ == "__main__":
    main()
