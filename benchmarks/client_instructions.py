"""Instructions per step of our client in case 1 (one route, rlmesh 0.1.0 env + model servers).

Case 5 of ``compare_rlmesh.py`` reads the client's CPU time per step, which
swings by tens of percent on a loaded machine; the count of user-space
instructions does not. The servers run natively (rlmesh 0.1.0's, as in case
1); the client runs in a child under ``valgrind --tool=callgrind`` with
instrumentation off, runs one unmeasured warm-up episode, and is counted for
the measured episodes only (``rt.run_routes`` over one route, connection
setup included), after a full garbage collection and ``gc.freeze()`` (so
that an old-generation collection, whose cost depends on the heap, does not
land in the window by chance). Needs valgrind and the ``interop`` extra::

    python benchmarks/client_instructions.py [--episodes 2] [--repeats 1]

To compare versions, point the child at another tree: ``--tree DIR`` puts
DIR first on its ``PYTHONPATH`` (e.g. a ``git worktree add`` of an old
commit). Kernel time is not counted (system calls, context switches).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

_HERE = Path(__file__).resolve()
_REPO = _HERE.parent.parent
#: The child's lines: it is warm, then it has run (with the steps), on its stdout.
_WARM, _RAN = "warm", "ran"


def _child(env: str, model: str, episodes: int) -> None:
    """Under callgrind: warm up, wait for "go", run the measured episodes, wait for "stop"."""
    import trio

    import rlmesh_trio as rt

    def once(seeds: list[int]) -> int:
        route = rt.Route(env=env, model=model, seeds=seeds)
        report = trio.run(rt.run_routes, [route])
        return int(report.total_steps)

    once([1000])
    # A full collection's cost grows with the heap and falls in a measured window or
    # not by chance (+-15% between runs of the same code): collect now, and freeze what
    # is left so the measured run's collections walk only the objects it made.
    gc.collect()
    gc.freeze()
    print(_WARM, flush=True)
    sys.stdin.readline()
    steps = once(list(range(episodes)))
    print(f"{_RAN} {steps}", flush=True)
    sys.stdin.readline()


def _instrument(pid: int, on: bool) -> None:
    command = ["callgrind_control", "-i", "on" if on else "off", str(pid)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)


def _total(out: Path) -> int:
    """The instructions a callgrind file counted (its ``totals:`` line)."""
    for line in out.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no totals line")


def _measure(tree: Path, env: str, model: str, episodes: int, out: Path) -> tuple[int, int]:
    """(instructions, steps) of one measured client run of ``tree``'s code."""
    argv = ["valgrind", "-q", "--tool=callgrind", "--instr-atstart=no"]
    argv += [f"--callgrind-out-file={out}", sys.executable, str(_HERE), "--child"]
    argv += ["--env", env, "--model", model, "--episodes", str(episodes)]
    child_env = dict(os.environ, PYTHONPATH=str(tree), PYTHONWARNINGS="ignore")
    child = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        if child.stdout.readline().strip() != _WARM:
            raise RuntimeError("the client under callgrind did not warm up")
        _instrument(child.pid, True)
        child.stdin.write("go\n")
        child.stdin.flush()
        ran = child.stdout.readline().split()
        if ran[:1] != [_RAN]:
            raise RuntimeError(f"the measured run did not finish: {ran}")
        _instrument(child.pid, False)
        child.stdin.write("stop\n")
        child.stdin.flush()
        child.wait(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return _total(out), int(ran[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=_REPO, help="the rlmesh_trio to measure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--env", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.env, args.model, args.episodes)
        return
    # Here, not at the top: the child imports only the tree it measures.
    sys.path.insert(0, str(_HERE.parent))
    import _servers

    with (
        _servers.rlmesh_env() as env,
        _servers.rlmesh_model() as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for repeat in range(args.repeats):
            out = Path(tmp, f"client{repeat}.callgrind")
            total, steps = _measure(args.tree, env.address, model.address, args.episodes, out)
            print(f"{args.tree}: {steps} steps, {total / steps:,.0f} instructions/step", flush=True)


if __name__ == "__main__":
    main()
