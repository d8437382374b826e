"""Torch policies both ways with rlmesh 0.1.0: its ``rlmesh.torch.Model`` server under our
runtime, and our served torch module under its runtime; the actions are the module's own."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
rlmesh = pytest.importorskip("rlmesh")

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio.testing import ServerProcess, spawn_server  # noqa: E402

from .._rlmesh_inproc import in_thread, rlmesh_server  # noqa: E402
from ._models import cartpole_logs, logged_actions_match, make_mlp  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

_REPO = Path(__file__).resolve().parents[2]
_SERVE = Path(__file__).with_name("_rlmesh_torch_serve.py")


@contextlib.contextmanager
def rlmesh_torch_model() -> Iterator[ServerProcess]:
    """``rlmesh.torch.Model(argmax of make_mlp())`` served in a child process on loopback."""
    if not os.path.exists("/proc/self/net/tcp"):
        pytest.skip("serving an rlmesh model on port 0 needs Linux /proc to learn the port")
    env = dict(os.environ, PYTHONWARNINGS="ignore", RLMESH_WORKFLOW_EDITION="2026.06")
    argv = [sys.executable, str(_SERVE), "--ready-fd", "{READY_FD}"]
    proc = spawn_server(argv, what="rlmesh torch model", env=env, cwd=_REPO, startup_timeout=30)
    try:
        yield proc
    finally:
        proc.stop()


async def test_our_runtime_drives_an_rlmesh_torch_server() -> None:
    # One server process (it imports torch: seconds) for both ways of sending predicts.
    with rlmesh_torch_model() as server:
        for batch_predicts in (False, True):
            logs = cartpole_logs(2)
            routes = rt.shard(envs=logs, model=server.address, seeds=range(4))
            report = await rt.run_routes(routes, batch_predicts=batch_predicts)
            assert report.ok and report.total_episodes == 4
            assert logged_actions_match(logs, make_mlp()) == report.total_steps


def _rlmesh_run(model_address: str, env_address: str, seeds: list[int]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rlmesh.run(rlmesh.RemoteModel(model_address), env_address, seeds=seeds)


async def test_rlmesh_runtime_drives_our_served_torch_module() -> None:
    (log,) = cartpole_logs(1)
    seeds = [0, 1, 2]
    async with rlmesh_server(log) as env_address:
        async with rt.serve_model(make_mlp(), "127.0.0.1:0") as ours:
            result = await in_thread(lambda: _rlmesh_run(ours.address, env_address, seeds))
    assert [e.seed for e in result.episodes] == seeds
    assert logged_actions_match([log], make_mlp()) == sum(e.steps for e in result.episodes)
