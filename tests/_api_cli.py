"""One CLI call the API-edge tests share: ``run`` CartPole with the demo policy."""

from __future__ import annotations

import subprocess

from ._cli import run_cli

DEMO_RUN = (
    "run",
    "--env",
    "CartPole-v1",
    "--model",
    "rlmesh_trio.inprocess._demo_policy:cartpole_policy",
)


def run_demo(*extra: str) -> subprocess.CompletedProcess[str]:
    """``rlmesh-trio run --env CartPole-v1 --model <demo policy> EXTRA...`` as a subprocess."""
    return run_cli(*DEMO_RUN, *extra)
