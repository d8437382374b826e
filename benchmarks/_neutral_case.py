"""Case 9 of ``compare_rlmesh.py`` (issue 22): a neutral client drives both sides' servers.

rlmesh 0.1.0's own runtime (``rlmesh.run`` with a ``RemoteModel``) runs the same
CartPole episodes against our env + model servers and against rlmesh's, so the
client is the same program on both sides and only the servers differ. Each side
reports its speed (steps/s) and the CPU its server processes spent per step
(read from ``/proc/<pid>/stat`` by ``_servers.Server.cpu_seconds``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["EPISODES", "SERVER_CPU_TARGET", "SPEED_TARGET", "neutral_rows", "neutral_sides"]

#: Episodes per run (CartPole with the deterministic rule: up to 500 steps each).
EPISODES = 30
#: Ours / rlmesh's, both driven by rlmesh's runtime: speed at least, server CPU per step at most.
SPEED_TARGET = 1.3
SERVER_CPU_TARGET = 0.8

Run = Callable[[], Any]


def neutral_sides(
    ours: tuple[str, str],
    theirs: tuple[str, str],
    episodes: int,
    run_rlmesh: Callable[[Sequence[Run]], Any],
) -> list[tuple[str, Run]]:
    """(label, run) for each side; ``ours``/``theirs`` are (env address, model address)
    and ``run_rlmesh`` measures a list of rlmesh jobs (``compare_rlmesh._theirs``)."""
    import rlmesh

    seeds = list(range(episodes))

    def side(env: str, model: str) -> Run:
        job = lambda: rlmesh.run(rlmesh.RemoteModel(model), env, seeds=seeds)  # noqa: E731
        return lambda: run_rlmesh([job])

    return [("ours", side(*ours)), ("theirs", side(*theirs))]


def neutral_rows(case: Any, fmt: Callable[..., str]) -> list[list[str]]:
    """The case's two table rows: speed ratio and server CPU per step ratio (ours/theirs)."""
    sides = {side.label: side for side in case.sides}
    ours, theirs = sides["ours"], sides["theirs"]
    rate_a, rate_b = ours.median_rate(), theirs.median_rate()
    cpu_a, cpu_b = ours.median_server_cpu_us(), theirs.median_server_cpu_us()
    speed = rate_a / rate_b if rate_a is not None and rate_b else None
    cpu = cpu_a / cpu_b if cpu_a is not None and cpu_b else None

    def met(ok: bool) -> str:
        return "MISMATCH" if case.mismatches else ("yes" if ok else "no")

    return [
        ["9", fmt(rate_a), fmt(rate_b), fmt(speed, ".2f"), f">= {SPEED_TARGET}",
         met(speed is not None and speed >= SPEED_TARGET)],
        ["9 (server cpu us/step)", fmt(cpu_a), fmt(cpu_b), fmt(cpu, ".2f"),
         f"<= {SERVER_CPU_TARGET}x", met(cpu is not None and cpu <= SERVER_CPU_TARGET)],
    ]  # fmt: skip
