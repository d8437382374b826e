"""Start-up time: ``import rlmesh_trio`` against ``import gymnasium, numpy, trio``, and the CLI's.

Run from the repository root (the core install is enough)::

    python benchmarks/import_time.py              # 9 rounds, both bytecode modes
    python benchmarks/import_time.py --rounds 15 --mode cached

Every case runs in a fresh interpreter, the cases interleaved round by round
(the order rotated each round), and the table shows medians:

* ``import`` cases time the import statement inside the child
  (``perf_counter`` around it), so interpreter start-up is left out; the
  ratio column divides by the ``gymnasium, numpy, trio`` baseline of the same
  mode. ``rt.run ready`` also resolves ``rt.run`` and ``rt.shard`` (the names a
  script's first run needs: the orchestrator, the runtime, the wire clients).
* ``rlmesh-trio`` cases are the whole process, start to exit (what a person
  waits for), beside ``python -c pass`` for the interpreter's own share.

Two bytecode modes, because they differ by a factor on this package:

* ``cached``: compiled bytecode is written once (to a temporary
  ``PYTHONPYCACHEPREFIX``, nothing in the tree) and read after a warm-up run,
  as it is for an installed wheel.
* ``source``: ``PYTHONDONTWRITEBYTECODE=1``: the installed packages read their
  own caches, but a checkout without ``__pycache__`` folders compiles every
  module of rlmesh_trio from source on each start (a shell that sets that
  variable; the table says when the tree has a cache after all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_TIMED = (
    "import time; _t = time.perf_counter(); {stmt}; "
    "print(repr(time.perf_counter() - _t), flush=True)"
)
_CLI = (
    "import sys; sys.argv = ['rlmesh-trio', *sys.argv[1:]]; "
    "from rlmesh_trio.cli import main; main()"
)

#: name -> (kind, code, argv); "import" cases print their own time, "process" ones are timed whole.
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "gymnasium, numpy, trio": ("import", "import gymnasium, numpy, trio", ()),
    "rlmesh_trio": ("import", "import rlmesh_trio", ()),
    "rt.run ready": ("import", "import rlmesh_trio as rt; rt.run; rt.shard", ()),
    "python -c pass": ("process", "pass", ()),
    "rlmesh-trio --help": ("process", _CLI, ("--help",)),
    "rlmesh-trio run --help": ("process", _CLI, ("run", "--help")),
}
BASELINE = "gymnasium, numpy, trio"


def child_env(mode: str, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["COLUMNS"] = "100"
    if mode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)  # the installed packages' own caches are read
    return env


def once(case: str, env: dict[str, str]) -> float:
    """Seconds of one fresh run of ``case``."""
    kind, code, argv = CASES[case]
    stmt = _TIMED.format(stmt=code) if kind == "import" else code
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", stmt, *argv],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{case} failed:\n{result.stderr}")
    return float(result.stdout.strip().splitlines()[-1]) if kind == "import" else wall


def measure(mode: str, rounds: int, cache: Path) -> dict[str, list[float]]:
    env = child_env(mode, cache)
    names = list(CASES)
    if mode == "cached":
        for name in names:  # write every module's bytecode once
            once(name, env)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(once(name, env))
    return times


def table(mode: str, times: dict[str, list[float]]) -> None:
    base = statistics.median(times[BASELINE])
    cached_tree = (REPO / "rlmesh_trio" / "__pycache__").is_dir()
    note = (
        " (the tree has __pycache__ folders: not all compiled)"
        if mode == "source" and cached_tree
        else ""
    )
    print(f"\n{mode} bytecode ({len(times[BASELINE])} rounds, medians){note}")
    print(f"  {'case':<26} {'kind':<8} {'median s':>9} {'min s':>7} {'x baseline':>11}")
    for name, values in times.items():
        kind = CASES[name][0]
        median = statistics.median(values)
        ratio = f"{median / base:.2f}x" if kind == "import" else ""
        print(f"  {name:<26} {kind:<8} {median:>9.3f} {min(values):>7.3f} {ratio:>11}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--mode", choices=["cached", "source", "both"], default="both")
    args = parser.parse_args()
    modes = ["cached", "source"] if args.mode == "both" else [args.mode]
    with tempfile.TemporaryDirectory(prefix="rlmesh-import-") as folder:
        for mode in modes:
            table(mode, measure(mode, args.rounds, Path(folder)))
    print("\nimport: the import statement inside a fresh interpreter; process: start to exit.")


if __name__ == "__main__":
    main()
