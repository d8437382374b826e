"""The client side needs no asyncio: importing the package leaves asyncio alone, and
``run_routes`` runs under plain ``trio.run`` with no asyncio loop opened."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_leaves_the_asyncio_event_loop_policy_alone() -> None:
    out = _run(
        """
        import asyncio
        before = type(asyncio.get_event_loop_policy())
        import rlmesh_trio
        loop = asyncio.new_event_loop()
        print(type(asyncio.get_event_loop_policy()) is before, type(loop).__module__)
        loop.close()
        import sys
        print("trio_asyncio" in sys.modules)
        """
    )
    assert out.splitlines() == ["True asyncio.unix_events", "False"]


def test_remote_routes_run_under_plain_trio_without_trio_asyncio() -> None:
    # The env server runs in its own thread (a plain asyncio loop there); the
    # route's clients run in the main thread's Trio run with no bridge.
    out = _run(
        """
        import sys
        import gymnasium
        import trio
        import rlmesh_trio as rt
        from rlmesh_trio._demo_policy import cartpole_policy

        async def main():
            async with rt.serve_env(gymnasium.make("CartPole-v1")) as server:
                route = rt.Route(env=server.address, model=cartpole_policy, episodes=2)
                return await rt.run_routes([route])

        report = trio.run(main)
        print(report.ok, report.total_episodes, "trio_asyncio" in sys.modules)
        """
    )
    assert out.splitlines()[-1] == "True 2 False"
