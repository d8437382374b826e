"""What durable runs cost: the ledger per episode and per step, and the retry time after a restart.

Run from the repository root (needs the ``interop`` extra, i.e. ``rlmesh==0.1.0``)::

    python benchmarks/ledger_cost.py                 # 3 pairs, 3 episodes per route
    python benchmarks/ledger_cost.py --pairs 5 --episodes 4

Three measurements:

1. ``write``: one ``LedgerWriter.write_episode`` call (JSON encode + one
   ``os.write`` of one line), and one ``os.fsync`` of the file, in
   microseconds (median of many), on this machine's disk.
2. ``case 2``: compare_rlmesh.py's case 2 (4 routes over 4 rlmesh env
   servers, one rlmesh model server, the CartPole rule), ours without and
   with ``ledger=``, alternating A B A B after one warm-up of each: median
   steps/s of each and the ledger's share of throughput (target < 2%).
3. ``retry``: one route over our env server (and rlmesh's); the server is
   SIGKILLed after the first episode and restarted on its port; the time
   from "server ready again" to "the interrupted episode started again",
   against the backoff in force (target: within backoff + 0.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import trio  # noqa: E402

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio.inprocess._demo_policy import cartpole_policy  # noqa: E402
from rlmesh_trio.orchestrator._ledger import LedgerWriter  # noqa: E402
from rlmesh_trio.orchestrator._plan import Ticket  # noqa: E402
from rlmesh_trio.testing import READY_FD, spawn_server  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402

ROUTES = 4
REPO = Path(__file__).resolve().parents[1]


def write_cost(folder: Path, count: int = 2000) -> tuple[float, float]:
    """Median microseconds of one episode line, and of one fsync."""
    writer = LedgerWriter(folder / "micro.jsonl")
    result = rt.EpisodeResult(0, "0" * 36, 0, 7, 500, 500.0, False, True, None, 1.0, "ep-000001")
    ticket = Ticket("route-0", 0, 7, 0)
    writes, syncs = [], []
    for i in range(count):
        t0 = time.perf_counter()
        writer.write_episode(ticket, result)
        writes.append(time.perf_counter() - t0)
        if i % 10 == 0:
            t0 = time.perf_counter()
            writer.sync()
            syncs.append(time.perf_counter() - t0)
    writer.close()
    return statistics.median(writes) * 1e6, statistics.median(syncs) * 1e6


def run_case2(routes: list[rt.Route], ledger: Path | None) -> tuple[float, int, int]:
    """(steps/s, steps, episodes) of one run."""
    t0 = time.perf_counter()
    report = rt.run(routes, ledger=ledger)
    wall = time.perf_counter() - t0
    assert report.ok, [o.error for o in report.routes]
    return report.total_steps / wall, report.total_steps, report.total_episodes


def case2(pairs: int, episodes: int, folder: Path) -> dict[str, Any]:
    with contextlib_servers() as (envs, model):
        seeds = list(range(episodes * ROUTES))
        routes = rt.shard([e.address for e in envs], model.address, seeds=seeds)
        n = 0

        def ledger() -> Path:
            nonlocal n
            n += 1
            return folder / f"case2-{n}.jsonl"

        run_case2(routes, None)
        run_case2(routes, ledger())
        plain, kept = [], []
        steps = eps = 0
        for _ in range(pairs):
            rate, steps, eps = run_case2(routes, None)
            plain.append(rate)
            kept.append(run_case2(routes, ledger())[0])
    a, b = statistics.median(plain), statistics.median(kept)
    return {
        "steps_per_run": steps,
        "episodes_per_run": eps,
        "steps_per_s_without": round(a, 1),
        "steps_per_s_with_ledger": round(b, 1),
        "ledger_share_pct": round(100.0 * (a - b) / a, 2),
        "runs_without": [round(r, 1) for r in plain],
        "runs_with": [round(r, 1) for r in kept],
    }


class contextlib_servers:
    """Four rlmesh env servers and one rlmesh model server, stopped on exit."""

    def __enter__(self) -> tuple[list[_servers.Server], _servers.Server]:
        import contextlib

        self.stack = contextlib.ExitStack()
        self.model = self.stack.enter_context(_servers.rlmesh_model())
        self.envs = [self.stack.enter_context(_servers.rlmesh_env()) for _ in range(ROUTES)]
        return self.envs, self.model

    def __exit__(self, *exc: object) -> None:
        self.stack.close()


def _serve(kind: str, port: int) -> Any:
    where = f"127.0.0.1:{port}"
    if kind == "ours":
        argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", "CartPole-v1"]
    else:
        argv = [sys.executable, "-m", "rlmesh._cli.serve_env", "--env", "CartPole-v1"]
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=str(REPO))
    return spawn_server([*argv, "--address", where, "--ready-fd", READY_FD], env=env, cwd=REPO)


class _Restart(rt.RuntimeHooks):
    """Kill the server after the first episode, restart it from a thread, time the comeback."""

    def __init__(self, kind: str, server: Any) -> None:
        self.kind, self.server = kind, server
        self.episodes = 0
        self.ready_at: float | None = None
        self.resumed_at: float | None = None

    async def episode_completed(self, event: Any) -> None:
        self.episodes += 1
        if self.episodes == 1:
            port = int(self.server.address.rsplit(":", 1)[1])
            self.server.kill()
            threading.Thread(target=self._restart, args=(port,), daemon=True).start()

    def _restart(self, port: int) -> None:
        self.server = _serve(self.kind, port)
        self.ready_at = time.perf_counter()

    async def episode_started(self, event: Any) -> None:
        if self.ready_at is not None and self.resumed_at is None:
            self.resumed_at = time.perf_counter()


def retry_time(kind: str, backoff: float) -> dict[str, Any]:
    server = _serve(kind, 0)
    hook = _Restart(kind, server)
    route = rt.Route(env=server.address, model=cartpole_policy, seeds=(1, 2), route_id="r")
    report = trio.run(lambda: rt.run_routes([route], hooks=hook, retries=12, retry_backoff=backoff))
    hook.server.kill()
    assert report.ok and hook.ready_at is not None and hook.resumed_at is not None
    retries = report.outcome("r").retries
    # The wait in force when the server came back: the nominal delay of the last retry.
    in_force = min(30.0, backoff * 2 ** (retries - 1))
    took = hook.resumed_at - hook.ready_at
    return {
        "server": kind,
        "backoff": backoff,
        "retries": retries,
        "ready_to_resumed_s": round(took, 3),
        "last_backoff_s": in_force,
        "within_backoff_plus_0.5s": took <= in_force + 0.5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=3, help="episodes per route in case 2")
    parser.add_argument("--backoff", type=float, default=0.25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_us, fsync_us = write_cost(folder)
        print(json.dumps({"write_episode_us": round(write_us, 1), "fsync_us": round(fsync_us, 1)}))
        result = case2(args.pairs, args.episodes, folder)
        per_step_us = write_us / (result["steps_per_run"] / result["episodes_per_run"])
        result["ledger_us_per_episode"] = round(write_us, 1)
        result["ledger_us_per_step"] = round(per_step_us, 3)
        print(json.dumps(result))
    for kind in ("ours", "rlmesh"):
        print(json.dumps(retry_time(kind, args.backoff)))


if __name__ == "__main__":
    main()
