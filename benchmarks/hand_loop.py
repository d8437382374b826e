"""The hand-written-loop scoreboard (issue 33): us against what users write without us.

Run from the repository root::

    python benchmarks/hand_loop.py                  # 2 interleaved rounds, 2 episodes per lane
    python benchmarks/hand_loop.py --pairs 3 --shapes A,B,D
    python benchmarks/hand_loop.py --quick          # smoke run: 1 round, 50-step episodes

One process, one workload: 32 ``CartPole-v1`` envs, one torch MLP
4-256-256-2 on one thread (``_hand_policy.py``: argmax over its logits,
episodes run to CartPole's 500-step cap), ``--episodes`` episodes per lane,
seeds ``0 .. 32 * episodes - 1`` on every row. Rows:

* plain: the hand loop over ``gym.make_vec(..., "sync")``, one forward per
  step -- the reference (ratio 1.00);
* sb3: Stable-Baselines3 ``evaluate_policy`` over a 32-env ``DummyVecEnv``;
* rlmesh: rlmesh 0.1.0 ``rlmesh.run(model, vector_env)`` (``predict_batch``);
* async: the hand loop over gymnasium's ``AsyncVectorEnv`` (32 subprocesses);
* A: ``rt.shard(envs=[32 envs], model=module)``; A': the same with
  ``batch_predicts=True``; B: one route over a list of 32 envs; C: one route
  over a sync vector env with autoreset disabled ("refused" when the tree
  refuses it); D: two ``serve-env --lanes 16`` servers, one route each, the
  module here (targets: A, B, C >= 0.8x plain; D >= 2x async).

Each round runs every row once, in order (rows interleave, so load drifts
hit all alike); a row's figure is its best round. Env construction is not
timed (see ``_hand_measure.py``); memory per lane is the first run's
memory growth (USS, workers and servers included) over 32 lanes. Every
run's episodes are checked against the plain loop's first run (by seed,
or as a multiset where the side cannot say which seed an episode ran): a
disagreement prints ``MISMATCH`` and the script exits 1, so a fast wrong
answer cannot win.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")  # gymnasium's step-after-done chatter, rlmesh's edition warning

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _hand_anchors  # noqa: E402
import _hand_ours  # noqa: E402
import _hand_policy  # noqa: E402
import _hand_served  # noqa: E402
from _hand_measure import Refused, Sample, agreement  # noqa: E402

TARGET_IN_PROCESS = 0.8  # A, B, C: at least this fraction of the plain loop's speed
TARGET_SERVED = 2.0  # D: at least this many times AsyncVectorEnv's speed
QUICK_MAX_STEPS = 50


@dataclass
class Row:
    """One line of the table: who, how, what runs it, what it must reach."""

    key: str
    who: str
    how: str
    target: str = "-"
    samples: list[Sample] = field(default_factory=list)
    refused: str | None = None
    error: str | None = None
    mismatches: list[str] = field(default_factory=list)
    unchecked: bool = False  # a run had no reference episodes to be checked against

    def best(self) -> Sample | None:
        return max(self.samples, key=lambda s: s.rate) if self.samples else None


ROWS: list[Row] = [
    Row("plain", "gymnasium", "make_vec sync, hand loop (reference)"),
    Row("sb3", "Stable-Baselines3", "evaluate_policy, DummyVecEnv(32)"),
    Row("rlmesh", "rlmesh 0.1.0", "rlmesh.run(model, make_vec sync)"),
    Row("async", "gymnasium", "AsyncVectorEnv(32), hand loop"),
    Row("A", "rlmesh-trio", "shard(32 envs, module)", f">= {TARGET_IN_PROCESS}x plain"),
    Row("A'", "rlmesh-trio", "shard(32 envs), batch_predicts"),
    Row("B", "rlmesh-trio", "Route(env=[32 envs])", f">= {TARGET_IN_PROCESS}x plain"),
    Row("C", "rlmesh-trio", "Route(env=make_vec, no autoreset)", f">= {TARGET_IN_PROCESS}x plain"),
    Row("D", "rlmesh-trio", "2 x serve-env --lanes 16", f">= {TARGET_SERVED}x async"),
]


def _runners(servers: Any) -> dict[str, Callable[[int, int | None], Sample]]:
    return {
        "plain": _hand_anchors.plain,
        "sb3": _hand_anchors.sb3,
        "rlmesh": _hand_anchors.rlmesh_run,
        "async": _hand_anchors.async_vector,
        "A": _hand_ours.shard,
        "A'": functools.partial(_hand_ours.shard, batch_predicts=True),
        "B": _hand_ours.lanes,
        "C": _hand_ours.vector,
        "D": functools.partial(_hand_served.served_lanes, servers),
    }


def _run_row(row: Row, run: Callable[[int, int | None], Sample], args: Any, ref: Row) -> None:
    if row.refused or row.error:
        return
    try:
        sample = run(args.episodes, args.max_steps)
    except Refused as exc:
        row.refused = str(exc)
        return
    except Exception as exc:  # a broken row is reported in its line; the others still run
        row.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
        return
    row.samples.append(sample)
    if row is ref:
        return
    if not ref.samples:
        row.unchecked = True  # no reference run to check against
        return
    diff = agreement(ref.samples[0], sample)
    if diff is not None:
        row.mismatches.append(diff)
        print(f"MISMATCH {row.key} run {len(row.samples)}: {diff}", flush=True)


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def _met(row: Row, vs_plain: float | None, vs_async: float | None) -> str:
    if row.mismatches:
        return "MISMATCH"
    if row.target == "-":
        return ""
    ratio, goal = (vs_async, TARGET_SERVED) if row.key == "D" else (vs_plain, TARGET_IN_PROCESS)
    return "-" if ratio is None else ("yes" if ratio >= goal else "no")


def _table(rows: Sequence[Row]) -> list[list[str]]:
    by_key = {row.key: row for row in rows}
    plain, asyncv = by_key["plain"].best(), by_key.get("async", Row("", "", "")).best()
    table = []
    for row in rows:
        best = row.best()
        rate = best.rate if best else None
        vs_plain = rate / plain.rate if rate and plain and plain.rate else None
        vs_async = rate / asyncv.rate if rate and asyncv and asyncv.rate else None
        first = row.samples[0] if row.samples else None
        mb = first.rss_bytes / 2**20 / _hand_policy.LANES if first and first.rss_bytes else None
        check = "MISMATCH" if row.mismatches else "-"
        if not row.mismatches and row.samples:
            check = "ref" if row.key == "plain" else ("unchecked" if row.unchecked else "ok")
        speed = "refused" if row.refused else ("error" if row.error else _fmt(rate))
        ratios = [_fmt(vs_plain, ".2f"), _fmt(vs_async, ".2f")]
        met = _met(row, vs_plain, vs_async)
        table.append(
            [row.key, row.who, row.how, speed, *ratios, row.target, met, _fmt(mb, ".2f"), check]
        )
    return table


HEADER = ["row", "who", "how", "steps/s", "vs plain", "vs async", "target", "met"]
HEADER += ["MB/lane", "agree"]


def _print_table(table: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [HEADER, *table]) for i in range(len(HEADER))]
    for line in [HEADER, ["-" * w for w in widths], *table]:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _parse(argv: Sequence[str] | None) -> Any:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="interleaved rounds (best counts)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per lane")
    parser.add_argument("--shapes", default="", help="rows to run, comma-separated (e.g. A,B,D)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, short episodes")
    parser.add_argument("--json", default=None, help="also write the table and notes here")
    args = parser.parse_args(argv)
    args.max_steps = None
    if args.quick:
        args.pairs, args.episodes, args.max_steps = 1, 1, QUICK_MAX_STEPS
    known = [row.key for row in ROWS]
    chosen = [s.strip() for s in args.shapes.split(",") if s.strip()] or known
    unknown = [s for s in chosen if s not in known]
    if unknown:
        parser.error(f"--shapes: unknown row(s) {', '.join(unknown)}; rows are {', '.join(known)}")
    if args.pairs < 1 or args.episodes < 1:
        parser.error("--pairs and --episodes must be >= 1")
    args.keys = ["plain", *[k for k in known if k in chosen and k != "plain"]]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    rows = [row for row in ROWS if row.key in args.keys]
    by_key = {row.key: row for row in rows}
    steps = args.max_steps or 500
    print(
        f"{_hand_policy.LANES} x {_hand_policy.ENV_ID}, torch MLP 4-256-256-2 (1 thread), "
        f"{args.episodes} episode(s) per lane (cap {steps} steps), {args.pairs} round(s)",
        flush=True,
    )
    with contextlib.ExitStack() as stack:
        servers = stack.enter_context(_hand_served.lane_servers()) if "D" in by_key else None
        runners = _runners(servers)
        for round_index in range(args.pairs):
            for row in rows:
                _run_row(row, runners[row.key], args, by_key["plain"])
            print(f"round {round_index + 1}/{args.pairs} done", flush=True)
    table = _table(rows)
    print()
    _print_table(table)
    for row in rows:
        if row.refused or row.error:
            print(f"{row.key}: {row.refused or row.error}")
    if args.json:
        notes = {row.key: row.refused or row.error for row in rows if row.refused or row.error}
        doc = {"header": HEADER, "table": table, "notes": notes}
        with open(args.json, "w") as out:
            json.dump(doc, out, indent=2)
    failed = any(row.mismatches or row.error for row in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
