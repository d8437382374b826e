"""Side by side with rlmesh 0.1.0: throughput of our runtime and servers against theirs.

Run from the repository root (needs the ``interop`` extra, i.e. ``rlmesh==0.1.0``)::

    python benchmarks/compare_rlmesh.py                      # 3 pairs, 3 episodes per route
    python benchmarks/compare_rlmesh.py --pairs 5 --episodes 4 --cases 1,3

Every server runs in its own subprocess on 127.0.0.1 (started here with
``--ready-fd``), so this process holds only the client side, for both
sides alike. Each case alternates ours and theirs (A B A B ...) after one
unmeasured warm-up of each, and reports the median steps/s of each side and
the ratio ours/theirs. The same seeds and the same deterministic policy
(CartPole: ``1 if theta + 0.5 * theta_dot > 0 else 0``) run on both sides,
and every run's episodes (steps and reward per seed) are checked against the
first run of the case: a disagreement prints a ``MISMATCH`` line and the
case is marked as failed, so a fast wrong answer cannot win.

Cases (issue 7):

1. one route, rlmesh env server + rlmesh model server: our ``run_routes``
   vs ``rlmesh.run(rlmesh.RemoteModel(model), env, seeds=...)``;
2. four routes (four rlmesh env servers, one rlmesh model server): ours vs
   four ``rlmesh.run`` calls in four threads; ``2b`` is ours with
   ``batch_predicts=True`` when ``run_routes`` accepts it ("n/a" otherwise);
3. one route, in-process policy: ``Route(env=addr, model=policy)`` vs
   ``rlmesh.run(rlmesh.numpy.Model(policy), env, seeds=...)``;
4. our env + model servers vs rlmesh's, both driven by our runtime;
5. our orchestrator's CPU time per step in case 1 (``time.process_time``
   of this process only / steps);
6. four routes, everything in process (gymnasium env objects, a policy
   callable): ours vs ``rlmesh.run(rlmesh.numpy.Model(policy), env, ...)``
   in four threads (see ``_local_case.py``); the table adds its client CPU
   per step (``6 (cpu us/step)``, target <= 60 us);
7. 32 routes, each with its own in-process CartPole env, sharing one served
   torch MLP (``_torch_case.py``): ours unbatched and with ``batch_predicts``
   on our model server, rlmesh's runtime in 32 threads on an
   ``rlmesh.torch.Model`` server of the same network;
8. 32 in-process CartPole routes sharing one torch MLP in process: ours
   unbatched vs ours with ``batch_predicts`` (no rlmesh side);
9. the neutral client (issue 22, ``_neutral_case.py``): rlmesh's own runtime
   (``rlmesh.run`` with a ``RemoteModel``, ``--neutral-episodes`` episodes)
   driving our env + model servers vs rlmesh's; the table adds the servers' CPU
   per step (``9 (server cpu us/step)``; targets: speed >= 1.3x, CPU <= 0.8x).

Row ``2b/2`` checks that batching never loses: case 2 with ``batch_predicts``
against case 2 without it, in the same run (target: at least 0.95, noise).

Wall time per run is measured around the whole blocking call on both sides
(``trio.run(run_routes)`` vs ``rlmesh.run``), connection setup included.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")  # rlmesh's unpinned-edition warning, gymnasium chatter

import attrs  # noqa: E402
import trio  # noqa: E402

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio.inprocess._demo_policy import cartpole_policy  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _local_case  # noqa: E402
import _neutral_case  # noqa: E402
import _servers  # noqa: E402
import _torch_case  # noqa: E402

ENV_ID = "CartPole-v1"
ROUTES_CASE2 = 4

#: Episode outcome per seed: (steps, reward).
Episodes = dict[int, tuple[int, float]]


@dataclass
class Sample:
    """One measured run."""

    steps: int
    wall_s: float
    cpu_s: float
    episodes: Episodes
    error: str | None = None
    server_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def cpu_us_per_step(self) -> float:
        return self.cpu_s / self.steps * 1e6 if self.steps else float("nan")

    @property
    def server_cpu_us_per_step(self) -> float:
        return self.server_cpu_s / self.steps * 1e6 if self.steps else float("nan")


@dataclass
class Side:
    """One side of a case: a label and a zero-argument run."""

    label: str
    run: Callable[[], Sample]
    samples: list[Sample] = field(default_factory=list)

    def median_rate(self) -> float | None:
        rates = [s.rate for s in self.samples if s.error is None]
        return statistics.median(rates) if rates else None

    def median_cpu_us(self) -> float | None:
        cpus = [s.cpu_us_per_step for s in self.samples if s.error is None]
        return statistics.median(cpus) if cpus else None

    def median_server_cpu_us(self) -> float | None:
        cpus = [s.server_cpu_us_per_step for s in self.samples if s.error is None]
        return statistics.median(cpus) if cpus else None


@dataclass
class Case:
    key: str
    title: str
    sides: list[Side]
    mismatches: list[str] = field(default_factory=list)
    reference: Episodes | None = None


class BenchmarkTimeout(Exception):
    pass


# ---- running one side ----------------------------------------------------------


#: Every server process started, so each run can report the CPU the servers spent on it.
SERVERS: list[_servers.Server] = []


def _server_cpu() -> float:
    return sum(server.cpu_seconds() for server in SERVERS)


def _measure(fn: Callable[[], tuple[int, Episodes]]) -> Sample:
    srv0 = _server_cpu()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        steps, episodes = fn()
    except Exception as exc:
        wall = time.perf_counter() - wall0
        return Sample(0, wall, time.process_time() - cpu0, {}, f"{type(exc).__name__}: {exc}")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return Sample(steps, wall, cpu, episodes, server_cpu_s=_server_cpu() - srv0)


def _ours(routes: Sequence[rt.Route], timeout: float, **options: Any) -> Sample:
    async def main() -> rt.RunReport:
        with trio.fail_after(timeout):
            return await rt.run_routes(routes, **options)

    def go() -> tuple[int, Episodes]:
        try:
            report = trio.run(main)
        except trio.TooSlowError:
            raise BenchmarkTimeout(f"our run took longer than {timeout}s") from None
        failed = [o for o in report.routes if o.status != "completed"]
        if failed:
            raise RuntimeError(f"route {failed[0].route_id} {failed[0].status}: {failed[0].error}")
        episodes: Episodes = {}
        for ep in report.episodes:
            episodes[ep.seed if ep.seed is not None else -1] = (ep.steps, float(ep.reward))
        return report.total_steps, episodes

    return _measure(go)


def _theirs(jobs: Sequence[Callable[[], Any]], timeout: float) -> Sample:
    """Run rlmesh jobs (each returns a RunResult): one directly, several in threads."""

    def collect(results: Sequence[Any]) -> tuple[int, Episodes]:
        episodes: Episodes = {}
        steps = 0
        for result in results:
            steps += int(result.total_steps)
            for ep in result.episodes:
                episodes[ep.seed if ep.seed is not None else -1] = (int(ep.steps), float(ep.reward))
        return steps, episodes

    def go() -> tuple[int, Episodes]:
        results: list[Any] = [None] * len(jobs)
        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                results[i] = jobs[i]()
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=worker, args=(i,), daemon=True) for i in range(len(jobs))
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise BenchmarkTimeout(f"rlmesh run took longer than {timeout}s")
        if errors:
            raise errors[0]
        return collect(results)

    return _measure(go)


# ---- the cases -------------------------------------------------------------------


def _seeds(first: int, count: int) -> list[int]:
    return list(range(first, first + count))


def _batching_supported() -> bool:
    # Since rt.RunOptions, run_routes takes its settings as typed keywords (**settings);
    # an older tree names batch_predicts in its signature.
    options = getattr(rt, "RunOptions", None)
    if options is not None:
        return "batch_predicts" in attrs.fields_dict(options)
    return "batch_predicts" in inspect.signature(rt.run_routes).parameters


@contextlib.contextmanager
def _cases(args: argparse.Namespace) -> Iterator[list[Case]]:
    """Start the servers the selected cases need; yield the cases; stop the servers."""
    import rlmesh
    import rlmesh.numpy as rnp

    wanted = set(args.cases)
    eps = args.episodes
    timeout = args.timeout
    cases: list[Case] = []
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        rl_envs: list[_servers.Server] = []
        rl_model = None
        if "6" in wanted:
            ours6, theirs6 = _local_case.local_sides(
                ENV_ID, eps, lambda r: _ours(r, timeout), lambda j: _theirs(j, timeout)
            )
            title6 = f"{_local_case.ROUTES} routes, in-process env + policy, no server"
            cases.append(Case("6", title6, [Side("ours", ours6), Side("theirs", theirs6)]))
        if wanted & {"1", "2", "4", "5", "9"}:
            rl_model = stack.enter_context(_servers.rlmesh_model())
        n_envs = ROUTES_CASE2 if "2" in wanted else (1 if wanted - {"6", "7", "8"} else 0)
        for _ in range(n_envs):
            rl_envs.append(stack.enter_context(_servers.rlmesh_env(ENV_ID)))
        if wanted & {"4", "9"}:
            our_env = stack.enter_context(_servers.our_env(ENV_ID))
            our_model = stack.enter_context(_servers.our_model())
        SERVERS[:] = [*rl_envs, *([rl_model] if rl_model else [])]
        if wanted & {"4", "9"}:
            SERVERS.extend([our_env, our_model])
        if "7" in wanted:
            cases.append(_case7(stack, timeout))
        if "8" in wanted:
            sides8 = _torch_case.local_sides(
                ENV_ID, _seeds(0, _torch_case.ROUTES), lambda r, **kw: _ours(r, timeout, **kw)
            )
            title8 = f"{_torch_case.ROUTES} in-process routes sharing one torch MLP in process"
            cases.append(Case("8", title8, [Side(label, run) for label, run in sides8]))
        print(f"servers ready in {time.perf_counter() - t0:.1f}s", flush=True)

        env0 = rl_envs[0].address if rl_envs else ""
        seeds1 = _seeds(0, eps)
        if wanted & {"1", "5"}:
            assert rl_model is not None
            model_addr = rl_model.address
            cases.append(
                Case(
                    "1",
                    "one route, rlmesh env + rlmesh model server",
                    [
                        Side(
                            "ours",
                            lambda: _ours(
                                [rt.Route(env=env0, model=model_addr, seeds=seeds1)], timeout
                            ),
                        ),
                        Side(
                            "theirs",
                            lambda: _theirs(
                                [
                                    lambda: rlmesh.run(
                                        rlmesh.RemoteModel(model_addr), env0, seeds=seeds1
                                    )
                                ],
                                timeout,
                            ),
                        ),
                    ],
                )
            )
        if "2" in wanted:
            assert rl_model is not None
            model_addr = rl_model.address
            addrs = [s.address for s in rl_envs]
            seeds4 = _seeds(0, eps * ROUTES_CASE2)
            routes = rt.shard(addrs, model_addr, seeds=seeds4)
            dealt = [seeds4[i :: len(addrs)] for i in range(len(addrs))]

            def job(addr: str, seeds: list[int]) -> Callable[[], Any]:
                return lambda: rlmesh.run(rlmesh.RemoteModel(model_addr), addr, seeds=seeds)

            sides = [
                Side("ours", lambda: _ours(routes, timeout)),
                Side(
                    "theirs",
                    lambda: _theirs(
                        [job(a, s) for a, s in zip(addrs, dealt, strict=True)], timeout
                    ),
                ),
            ]
            if _batching_supported():
                sides.append(
                    Side("ours+batch", lambda: _ours(routes, timeout, batch_predicts=True))
                )
            cases.append(Case("2", f"{ROUTES_CASE2} routes, one shared rlmesh model server", sides))
        if "3" in wanted:
            native = rnp.Model(cartpole_policy)
            cases.append(
                Case(
                    "3",
                    "one route, in-process policy, rlmesh env server",
                    [
                        Side(
                            "ours",
                            lambda: _ours(
                                [rt.Route(env=env0, model=cartpole_policy, seeds=seeds1)], timeout
                            ),
                        ),
                        Side(
                            "theirs",
                            lambda: _theirs(
                                [lambda: rlmesh.run(native, env0, seeds=seeds1)], timeout
                            ),
                        ),
                    ],
                )
            )
        if "4" in wanted:
            assert rl_model is not None
            ours_pair = (our_env.address, our_model.address)
            theirs_pair = (env0, rl_model.address)
            cases.append(
                Case(
                    "4",
                    "servers: ours vs rlmesh's, both driven by our runtime",
                    [
                        Side(
                            "ours",
                            lambda: _ours(
                                [rt.Route(env=ours_pair[0], model=ours_pair[1], seeds=seeds1)],
                                timeout,
                            ),
                        ),
                        Side(
                            "theirs",
                            lambda: _ours(
                                [rt.Route(env=theirs_pair[0], model=theirs_pair[1], seeds=seeds1)],
                                timeout,
                            ),
                        ),
                    ],
                )
            )
        if "9" in wanted:
            assert rl_model is not None
            ours9, theirs9 = (our_env.address, our_model.address), (env0, rl_model.address)
            cases.append(_case9(ours9, theirs9, args.neutral_episodes, timeout))
        yield cases


def _case9(ours: tuple[str, str], theirs: tuple[str, str], eps: int, timeout: float) -> Case:
    """rlmesh's runtime driving our env + model servers, then rlmesh's (``_neutral_case``)."""
    sides = _neutral_case.neutral_sides(ours, theirs, eps, lambda jobs: _theirs(jobs, timeout))
    title = "servers: ours vs rlmesh's, both driven by rlmesh's runtime (neutral client)"
    return Case("9", title, [Side(label, run) for label, run in sides])


def _case7(stack: contextlib.ExitStack, timeout: float) -> Case:
    """32 in-process envs sharing one served torch MLP, batched and not, vs rlmesh's threads.

    One episode per route whatever ``--episodes`` (32 routes of 500 steps already).
    """
    ours = stack.enter_context(_servers.our_model(_torch_case.POLICY_SPEC))
    theirs = stack.enter_context(_servers.rlmesh_model("rlmesh-torch"))
    envs = stack.enter_context(_servers.rlmesh_envs(_torch_case.ROUTES, ENV_ID))
    SERVERS.extend([ours, theirs, envs])
    sides = _torch_case.served_sides(
        ENV_ID,
        ours.address,
        theirs.address,
        envs.address.split(","),
        _seeds(0, _torch_case.ROUTES),
        lambda routes, **kw: _ours(routes, timeout, **kw),
        lambda jobs: _theirs(jobs, timeout),
    )
    title = f"{_torch_case.ROUTES} in-process envs sharing one served torch MLP (256x256)"
    return Case("7", title, [Side(label, run) for label, run in sides])


def _check(case: Case, side: Side, sample: Sample, index: int) -> None:
    if sample.error is not None:
        line = f"MISMATCH case {case.key} {side.label} run {index}: run failed: {sample.error}"
        case.mismatches.append(line)
        print(line, flush=True)
        return
    if case.reference is None:
        case.reference = sample.episodes
        return
    if sample.episodes != case.reference:
        seeds = sorted(set(sample.episodes) | set(case.reference))
        diff = [
            f"seed {s}: {sample.episodes.get(s)} vs {case.reference.get(s)}"
            for s in seeds
            if sample.episodes.get(s) != case.reference.get(s)
        ]
        line = (
            f"MISMATCH case {case.key} {side.label} run {index}: episodes differ from the "
            f"first run of the case ((steps, reward) here vs there): {'; '.join(diff[:6])}"
        )
        case.mismatches.append(line)
        print(line, flush=True)


def _run_case(case: Case, pairs: int, warmup: int) -> None:
    print(f"\ncase {case.key}: {case.title}", flush=True)
    for _ in range(warmup):
        for side in case.sides:
            sample = side.run()
            _check(case, side, sample, 0)
            print(f"  warm-up {side.label:<10} {sample.rate:8.0f} steps/s", flush=True)
    for i in range(1, pairs + 1):
        for side in case.sides:
            sample = side.run()
            side.samples.append(sample)
            _check(case, side, sample, i)
            extra = f"  ERROR {sample.error}" if sample.error else ""
            print(
                f"  run {i} {side.label:<10} {sample.rate:8.0f} steps/s  "
                f"{sample.steps:6d} steps in {sample.wall_s:6.2f}s  "
                f"cpu {sample.cpu_us_per_step:5.0f} us/step  "
                f"servers' cpu {sample.server_cpu_us_per_step:5.0f} us/step{extra}",
                flush=True,
            )


# ---- the table -------------------------------------------------------------------

#: Ratio targets ours/theirs: issue 13's for cases 1-4 (2b is issue 7's), case 6's is 1.0.
TARGETS = {"1": 3.2, "2": 1.77, "2b": 2.5, "3": 1.22, "4": 1.0, "6": 1.0}
#: Case 5 (issue 13): client CPU per step at most this, and at most this fraction of rlmesh's.
CPU_TARGET_US = 200.0
CPU_TARGET_VS_RLMESH = 0.65
#: Case 2 with ``batch_predicts`` against without: never below, within this much noise.
NEVER_LOSES = 0.95


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "n/a" if value is None else format(value, spec)


def _table(cases: list[Case], selected: set[str]) -> list[list[str]]:
    rows: list[list[str]] = []
    by_key = {c.key: c for c in cases}

    def ratio_row(label: str, case: Case, ours: Side | None, theirs: Side, target: float) -> None:
        a = ours.median_rate() if ours else None
        b = theirs.median_rate()
        ratio = a / b if a is not None and b else None
        ok = (
            "MISMATCH"
            if case.mismatches
            else ("yes" if ratio is not None and ratio >= target else "no")
        )
        if ours is None:
            ok = "n/a"
        rows.append([label, _fmt(a), _fmt(b), _fmt(ratio, ".2f"), f">= {target}", ok])

    for key in ("1", "2", "3", "4", "6"):
        if key not in by_key or key not in selected:
            continue
        case = by_key[key]
        sides = {s.label: s for s in case.sides}
        ratio_row(key, case, sides["ours"], sides["theirs"], TARGETS[key])
        if key == "2":
            ratio_row("2b (batch)", case, sides.get("ours+batch"), sides["theirs"], TARGETS["2b"])
            if "ours+batch" in sides:
                ratio_row("2b/2", case, sides["ours+batch"], sides["ours"], NEVER_LOSES)
    if "5" in selected and "1" in by_key:
        case = by_key["1"]
        sides = {s.label: s for s in case.sides}
        ours_cpu, theirs_cpu = sides["ours"].median_cpu_us(), sides["theirs"].median_cpu_us()
        cpu_ratio = ours_cpu / theirs_cpu if ours_cpu and theirs_cpu else None
        within = (
            ours_cpu is not None
            and cpu_ratio is not None
            and ours_cpu <= CPU_TARGET_US
            and cpu_ratio <= CPU_TARGET_VS_RLMESH
        )
        ok = "MISMATCH" if case.mismatches else ("yes" if within else "no")
        target = f"<= {CPU_TARGET_US:.0f} us, <= {CPU_TARGET_VS_RLMESH}x"
        ratio_text = _fmt(cpu_ratio, ".2f")
        rows.append(["5 (cpu us/step)", _fmt(ours_cpu), _fmt(theirs_cpu), ratio_text, target, ok])
    if "6" in by_key:
        rows.append(_cpu_row("6 (cpu us/step)", by_key["6"], _local_case.CPU_TARGET_US))
    if "7" in by_key and "7" in selected:
        case = by_key["7"]
        sides = {s.label: s for s in case.sides}
        batched = sides["ours+batch"]
        target = _torch_case.TARGET_SERVED_VS_UNBATCHED
        ratio_row("7 batch/unbatched", case, batched, sides["ours"], target)
        target = _torch_case.TARGET_SERVED_VS_RLMESH
        ratio_row("7 batch/rlmesh", case, batched, sides["theirs"], target)
        rows.append(_torch_case.ceiling_row(sides["ours"], batched, _fmt))
    if "8" in by_key and "8" in selected:
        sides = {s.label: s for s in by_key["8"].sides}
        target = _torch_case.TARGET_LOCAL_VS_UNBATCHED
        ratio_row("8 batch/unbatched", by_key["8"], sides["ours+batch"], sides["ours"], target)
    if "9" in by_key and "9" in selected:
        rows += _neutral_case.neutral_rows(by_key["9"], _fmt)
    return rows


def _cpu_row(label: str, case: Case, target: float) -> list[str]:
    sides = {s.label: s for s in case.sides}
    ours_cpu, theirs_cpu = sides["ours"].median_cpu_us(), sides["theirs"].median_cpu_us()
    ok = "MISMATCH" if case.mismatches else ("yes" if ours_cpu and ours_cpu <= target else "no")
    ratio = _fmt(ours_cpu / theirs_cpu if ours_cpu and theirs_cpu else None, ".2f")
    return [label, _fmt(ours_cpu), _fmt(theirs_cpu), ratio, f"<= {target:.0f} us", ok]


def _print_table(rows: list[list[str]]) -> None:
    header = ["case", "ours median", "theirs median", "ratio", "target", "met?"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print("(cases 1-4, 6, 9: steps/s, ratio = ours/theirs; cpu rows: client CPU us per step,")
    print(" but servers' CPU us per step in '9 (server cpu us/step)'; '7 ceiling': batched")
    print(" client CPU us/step, unbatched wall us/step, and their ratio, the most batch/unbatched")
    print(" can reach while the batched client is the bottleneck)")
    print("(measured on whatever load the machine had: compare ratios within one run)")


def _write_json(path: str, cases: list[Case], rows: list[list[str]], args: Any) -> None:
    import json

    doc = {
        "settings": {"pairs": args.pairs, "episodes": args.episodes, "warmup": args.warmup},
        "table": [
            dict(zip(["case", "ours", "theirs", "ratio", "target", "met"], row, strict=True))
            for row in rows
        ],
        "cases": {
            case.key: {
                "title": case.title,
                "mismatches": case.mismatches,
                "sides": {
                    side.label: [
                        {
                            "steps": s.steps,
                            "wall_s": s.wall_s,
                            "steps_per_s": s.rate,
                            "client_cpu_us_per_step": s.cpu_us_per_step,
                            "servers_cpu_us_per_step": s.server_cpu_us_per_step,
                            "error": s.error,
                        }
                        for s in side.samples
                    ]
                    for side in case.sides
                },
            }
            for case in cases
        },
    }
    with open(path, "w") as out:
        json.dump(doc, out, indent=2)


def _print_cpu(cases: list[Case]) -> None:
    """Where the CPU went: this (client) process vs the server processes, per step."""
    print("\nCPU per step, medians (us): client = this process, servers = all server processes")
    for case in cases:
        for side in case.sides:
            print(
                f"  case {case.key} {side.label:<10} client {_fmt(side.median_cpu_us()):>5}  "
                f"servers {_fmt(side.median_server_cpu_us()):>5}  "
                f"wall {_fmt(1e6 / r if (r := side.median_rate()) else None):>5}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pairs", type=int, default=3, help="measured ours/theirs pairs per case (>= 1)"
    )
    parser.add_argument(
        "--episodes", type=int, default=3, help="episodes per route (CartPole: 500 steps each here)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs of each side first")
    parser.add_argument(
        "--cases", default="1,2,3,4,5,6,7,8,9", help="comma-separated subset of 1-9 (5 needs 1)"
    )
    parser.add_argument(
        "--neutral-episodes",
        type=int,
        default=_neutral_case.EPISODES,
        help="episodes per run in case 9 (rlmesh's runtime on both sides' servers)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="bound on one run, seconds")
    parser.add_argument("--json", metavar="FILE", help="also write every sample and the table here")
    args = parser.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if args.pairs < 1 or args.episodes < 1 or args.neutral_episodes < 1:
        parser.error("--pairs, --episodes and --neutral-episodes must be >= 1")
    if "5" in args.cases and "1" not in args.cases:
        args.cases.append("1")
    try:
        import rlmesh
    except ImportError:
        print("rlmesh 0.1.0 is not installed: pip install '.[interop]'", file=sys.stderr)
        return 2

    print(
        f"rlmesh-trio {rt.__version__} vs rlmesh {getattr(rlmesh, '__version__', '0.1.0')}; "
        f"{ENV_ID}, {args.episodes} episode(s) per route, {args.pairs} pair(s), "
        f"batch_predicts {'available' if _batching_supported() else 'n/a'}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        with _cases(args) as cases:
            for case in cases:
                _run_case(case, args.pairs, args.warmup)
    except BenchmarkTimeout as exc:
        # An rlmesh run cannot be cancelled from here: stop the servers (done by the
        # exit stack above) and leave without waiting for its thread.
        print(f"ABORTED: {exc}", file=sys.stderr, flush=True)
        os._exit(3)
    rows = _table(cases, set(args.cases))
    _print_table(rows)
    if args.json:
        _write_json(args.json, cases, rows, args)
    _print_cpu(cases)
    mismatched = [m for c in cases for m in c.mismatches]
    print(f"total {time.perf_counter() - started:.0f}s", flush=True)
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
