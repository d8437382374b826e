"""Run one attack against one target while a legitimate client works, and take figures.

The sequence: one warm-up and ``UNLOADED_RUNS`` legitimate episodes on the quiet
server (their median and their slowest: on a busy machine the spread is the
machine's noise, not the server's), then the attack in a process of its
own (no shared interpreter lock, a lower CPU priority) with legitimate episodes
run as soon as the attack is under way ("during"; the attack keeps going until
they are done), then more once it is over ("after"); the quickest of each set counts. A
sampler watches the server's RSS meanwhile and halts the attack past
``RSS_ABORT_MIB`` (today's servers can be made to take gigabytes; the machine is
shared), as does ``ATTACK_TIME_CAP_S``.
Every figure is printed as one ``RELIABILITY`` line, and appended as JSON to the
file ``RLMESH_TRIO_RELIABILITY_LOG`` names, if set, before anything is asserted.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs

from ._attacks import Halt, Outcome, run_in_child
from ._legit import legit_episode
from ._targets import Target

UNLOADED_RUNS = 5
RSS_ABORT_MIB = 700.0
ATTACK_TIME_CAP_S = 20.0
#: Legitimate episodes during the attack and after it; the quickest of each set counts
#: (the machine's own hiccups are one-sided: they only ever add time). Two were once not
#: enough on a loaded CI machine: both "after" tries took 190 ms against 52 unloaded,
#: with the server idle (every attack connection closed) and 25 ms here on a rerun.
LEGIT_TRIES = 3
#: How long the server may take to give memory back after an attack.
RSS_SETTLE_S = 3.0
SAMPLE_EVERY_S = 0.02
LOG_ENV_VAR = "RLMESH_TRIO_RELIABILITY_LOG"


@attrs.define
class Figures:
    attack: str
    target: str
    unloaded_s: float = math.nan
    unloaded_max_s: float = math.nan
    during_s: float = math.nan
    after_s: float = math.nan
    legit_errors: list[str] = attrs.Factory(list)
    rss_start_mib: float = math.nan
    rss_peak_mib: float = math.nan
    rss_end_mib: float = math.nan
    attack_s: float = math.nan
    halted: str = ""
    error: str = ""
    outcome: Outcome = attrs.Factory(Outcome)

    def line(self) -> str:
        out = self.outcome
        return (
            f"RELIABILITY {self.target} {self.attack}: legit unloaded"
            f" {self.unloaded_s * 1e3:.0f} ms (slowest {self.unloaded_max_s * 1e3:.0f})"
            f" during {self.during_s * 1e3:.0f} ms after {self.after_s * 1e3:.0f} ms;"
            f" rss {self.rss_start_mib:.0f} -> peak {self.rss_peak_mib:.0f} -> "
            f"{self.rss_end_mib:.0f} MiB; attack {self.attack_s:.1f}s units {out.units}"
            f" sent {out.sent / 2**20:.1f} MiB conns {out.connections} goaways "
            f"{sorted(set(out.goaways))}x{len(out.goaways)} rst {sorted(set(out.rst_codes))}"
            f" statuses {sorted(set(out.statuses))} closed {out.closed} stalled {out.stalled}"
            f" unreacted {out.unreacted} {out.extra} {self.halted} {self.error}"
            f" {self.legit_errors}"
        )


def _legit(target: Target, figures: Figures) -> float:
    try:
        return legit_episode(target.kind, target.address)
    except Exception as exc:  # recorded, then asserted on by the test
        figures.legit_errors.append(f"{type(exc).__name__}: {exc}"[:300])
        return math.inf


def _watch(target: Target, halt: Halt, figures: Figures, done: threading.Event) -> None:
    deadline = time.monotonic() + ATTACK_TIME_CAP_S
    while not done.wait(SAMPLE_EVERY_S):
        if target.rss_mib() > RSS_ABORT_MIB:
            figures.halted = f"halted: server RSS past {RSS_ABORT_MIB:.0f} MiB"
            halt.hard.set()
        if time.monotonic() > deadline:
            figures.halted = f"halted: attack past {ATTACK_TIME_CAP_S:.0f}s"
            halt.hard.set()


def _settle(target: Target, figures: Figures, within_mib: float) -> None:
    deadline = time.monotonic() + RSS_SETTLE_S
    while True:
        figures.rss_end_mib = target.rss_mib()
        if figures.rss_end_mib - figures.rss_start_mib <= within_mib:
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)


def run_attack(
    name: str, target: Target, attack: Callable[[Halt], Outcome], settle_mib: float
) -> Figures:
    """The whole sequence above; never raises for what the server did (see ``Figures``)."""
    figures = Figures(name, f"{target.side}-{target.kind}")
    _legit(target, figures)  # warm-up: imports, first connections
    unloaded = [_legit(target, figures) for _ in range(UNLOADED_RUNS)]
    figures.unloaded_s, figures.unloaded_max_s = statistics.median(unloaded), max(unloaded)
    figures.rss_start_mib = target.rss_mib()
    target.reset_peak()
    context = multiprocessing.get_context("spawn")
    halt = Halt(soft=context.Event(), hard=context.Event(), started=context.Event())
    done = threading.Event()
    receiving, sending = context.Pipe(duplex=False)
    child = context.Process(target=run_in_child, args=(attack, halt, sending), daemon=True)
    watcher = threading.Thread(target=_watch, args=(target, halt, figures, done), daemon=True)
    started = time.monotonic()
    watcher.start()
    child.start()
    sending.close()
    halt.started.wait(ATTACK_TIME_CAP_S)
    figures.during_s = min(_legit(target, figures) for _ in range(LEGIT_TRIES))
    halt.soft.set()
    figures.outcome = _collect(receiving, child, figures)
    figures.attack_s = time.monotonic() - started
    done.set()
    watcher.join()
    figures.after_s = min(_legit(target, figures) for _ in range(LEGIT_TRIES))
    figures.rss_peak_mib = target.peak_mib()
    _settle(target, figures, settle_mib)
    _record(figures)
    return figures


def _collect(receiving: Any, child: Any, figures: Figures) -> Outcome:
    outcome = Outcome()
    if receiving.poll(ATTACK_TIME_CAP_S + 10):
        kind, value = receiving.recv()
        if kind == "outcome":
            outcome = value
        else:
            figures.error = value
    else:
        figures.error = "the attacker process gave no outcome in time"
    child.join(5)
    if child.is_alive():
        child.kill()
        child.join()
    return outcome


def _record(figures: Figures) -> None:
    print(figures.line(), flush=True)
    log = os.environ.get(LOG_ENV_VAR)
    if log:
        with open(log, "a") as out:
            out.write(json.dumps(attrs.asdict(figures)) + "\n")
