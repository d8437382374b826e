"""A real run writing a ledger, held twice, for the test that ``watch`` shows the run's figures.

``python -m tests._watch_figures_run LEDGER REPORT``: three routes over
in-process CartPole-v1 envs (gymnasium's own), four seeds each, a weak
deterministic policy (its returns differ from seed to seed, so the mean and
the CIs move as episodes arrive). Every route stops after its first episode
and again after its third (printing ``HELD <stage> <route>``) until a line
arrives on stdin: the test reads the page at two known points of the run.
At the end the run's JSON report (``RunReport.to_json``) is written to
REPORT, and ``DONE`` printed.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import gymnasium
import trio

import rlmesh_trio as rt
from rlmesh_trio.hooks.events import EpisodeCompletedEvent

#: Episodes of each route after which it is held (one stdin line releases every route).
HOLDS = (1, 3)
ROUTES = 3
EPISODES = 4


def weak_policy(obs: object) -> int:
    """Pushes toward the side the pole leans to, without looking ahead: tens of steps."""
    return 1 if float(obs[2]) > 0.0 else 0  # type: ignore[index]


class Hold(rt.RuntimeHooks):
    def __init__(self) -> None:
        self.done: Counter[str] = Counter()
        self.released = [trio.Event() for _ in HOLDS]

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        self.done[event.route_id] += 1
        if self.done[event.route_id] in HOLDS:
            stage = HOLDS.index(self.done[event.route_id])
            print(f"HELD {stage} {event.route_id}", flush=True)
            await self.released[stage].wait()

    async def read_releases(self) -> None:
        for event in self.released:
            await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            event.set()


async def main(ledger: str, out: str) -> None:
    routes = [
        rt.Route(
            env=lambda: gymnasium.make("CartPole-v1"),
            model=weak_policy,
            seeds=range(EPISODES * i, EPISODES * (i + 1)),
            route_id=f"route-{i}",
            max_episode_steps=200,
        )
        for i in range(ROUTES)
    ]
    hold = Hold()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold.read_releases)
        orchestrator = rt.Orchestrator(
            routes, hooks=hold, ledger=ledger, ledger_route_ends=True, handle_sigint=False
        )
        report = await orchestrator.run()
        nursery.cancel_scope.cancel()
    Path(out).write_text(report.to_json())
    print("DONE", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
