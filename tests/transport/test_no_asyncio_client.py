"""The client side needs no asyncio: importing the package leaves asyncio alone, and
``run_routes`` runs under plain ``trio.run`` with no asyncio loop opened."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from .._cli import serving

POLICY = "rlmesh_trio.inprocess._demo_policy:cartpole_policy"


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
    # The servers run in other processes; the routes' clients run in a plain
    # trio.run that never imports asyncio's bridge.
    with serving("serve-env", "CartPole-v1") as env, serving("serve-model", POLICY) as model:
        out = _run(
            f"""
            import sys
            import trio
            import rlmesh_trio as rt

            async def main():
                route = rt.Route(env={env!r}, model={model!r}, episodes=2)
                return await rt.run_routes([route])

            report = trio.run(main)
            print(report.ok, report.total_episodes, "trio_asyncio" in sys.modules)
            """
        )
    assert out.splitlines()[-1] == "True 2 False"
