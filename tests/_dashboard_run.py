"""A real run for the dashboard's browser tests, in a process of its own.

``python -m tests._dashboard_run hook`` serves the run's dashboard itself
(``rt.hooks.Dashboard``) and prints ``URL <url>``; ``... ledger PATH`` writes
a ledger instead (for ``rlmesh-trio watch``). Either way: two CartPole env
servers and the demo policy's model server on loopback (port 0), two routes
over them and one route to a closed port (it fails at once). Route
``good-0`` stops after its first and second episodes (``GATE 1``,
``GATE 2``), each time until a line arrives on stdin, so the test sees the
grid at two known points while the run is still going.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

import gymnasium
import trio

import rlmesh_trio as rt
from rlmesh_trio.hooks.events import EpisodeCompletedEvent
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.results import Recording


class Gate(rt.RuntimeHooks):
    """Holds route ``good-0`` after its first and its second episode, each time printing
    ``GATE n`` and waiting for a line on stdin (so the run cannot end meanwhile)."""

    def __init__(self) -> None:
        self.done = 0

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        if event.route_id == "good-0" and self.done < 2:
            self.done += 1
            print(f"GATE {self.done}", flush=True)
            await trio.to_thread.run_sync(sys.stdin.readline)


def closed_port() -> str:
    import socket

    with socket.socket() as probe:  # a port nobody listens on (bound, then released)
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


async def main(mode: str, ledger: str | None) -> None:
    recording = Recording(first=1) if mode == "hook" else None
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(rt.serve_model(cartpole_policy, "127.0.0.1:0"))
        envs = []
        for _ in range(2):
            env = gymnasium.make("CartPole-v1", render_mode="rgb_array")
            envs.append(await stack.enter_async_context(rt.serve_env(env, "127.0.0.1:0")))
        routes = [
            rt.Route(
                env=envs[i].address,
                model=model.address,
                seeds=range(4 * i, 4 * i + 4),
                route_id=f"good-{i}",
                max_episode_steps=120,
            )
            for i in range(2)
        ]
        routes.append(
            rt.Route(env=closed_port(), model=model.address, seeds=range(8, 10), route_id="broken")
        )
        if recording is not None:
            routes = recording.apply(routes)
        gate = Gate()
        if mode == "hook":
            with rt.hooks.Dashboard(
                routes, title="dashboard test run", recording=recording
            ) as dash:
                print("URL", dash.url, flush=True)
                hooks = rt.HookChain([dash, gate])
                report = await rt.run_routes(routes, hooks=hooks, on_failure="isolate")
                dash.finish(report)
                print("FINISHED", flush=True)
                await trio.to_thread.run_sync(dash.wait_viewed, 60.0)
        else:
            orchestrator = rt.Orchestrator(
                routes, hooks=gate, on_failure="isolate", ledger=ledger, ledger_route_ends=True
            )
            await orchestrator.run()
    print("DONE", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
