"""Issue 22: importing the package, serving both sides and running a route over them
loads neither grpclib nor asyncio (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    import rlmesh_trio as rt
    loaded = [name for name in ("grpclib", "asyncio") if name in sys.modules]
    assert not loaded, f"import rlmesh_trio loaded {loaded}"
    import gymnasium as gym
    from rlmesh_trio.inprocess._demo_policy import cartpole_policy
    with rt.ModelServer(cartpole_policy) as model, rt.EnvServer(gym.make("CartPole-v1")) as env:
        report = rt.run(rt.shard(envs=[env.address], model=model.address, seeds=range(2)))
        assert report.ok and report.total_episodes == 2
        assert rt.run(rt.shard(envs=[env.address], model=model.address, seeds=[7])).ok
    loaded = [name for name in ("grpclib", "asyncio") if name in sys.modules]
    assert not loaded, f"serving and a route loaded {loaded}"
    print("clean")
    """
)


def test_serving_and_a_route_import_neither_grpclib_nor_asyncio() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"
