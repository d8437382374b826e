"""``rt.run`` in a Jupyter cell (a real IPython kernel, whose asyncio loop runs the cell):
the run goes to a worker thread and the cell blocks until the report is in; "interrupt
kernel" gives RunInterrupted with the partial report. Plain asyncio is still refused
(tests/orchestrator/test_api_edges.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ipykernel")
jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.slow

RUN_CELL = """
import gymnasium as gym
import rlmesh_trio as rt
report = rt.run([rt.Route(env=gym.make("CartPole-v1"), model=rt.RANDOM, seeds=[1, 2, 3])])
print("episodes", report.total_episodes, report.routes[0].status)
"""

INTERRUPT_CELL = """
import sys
import gymnasium as gym
import rlmesh_trio as rt

class Announce(gym.Wrapper):
    resets = 0
    def reset(self, **kwargs):
        Announce.resets += 1
        if Announce.resets == 3:
            print("two episodes done", flush=True)
        return super().reset(**kwargs)

try:
    rt.run([rt.Route(env=Announce(gym.make("CartPole-v1")), model=rt.RANDOM, episodes=10**6)])
except rt.RunInterrupted as exc:
    route = exc.report.routes[0]
    print("interrupted", route.status, len(route.episodes) >= 2)
"""


@pytest.fixture
def kernel() -> Iterator[tuple[Any, Any]]:
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run_cell(client: Any, code: str, on_output: Any = None) -> tuple[str, list[str]]:
    printed: list[str] = []
    errors: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            printed.append(content["text"])
            if on_output is not None:
                on_output(content["text"])
        elif message["msg_type"] == "error":
            errors.append(f"{content['ename']}: {content['evalue']}")

    client.execute_interactive(code, timeout=180, output_hook=hook)
    return "".join(printed), errors


def test_rt_run_in_a_jupyter_cell_blocks_and_returns_the_report(kernel: Any) -> None:
    _, client = kernel
    printed, errors = _run_cell(client, RUN_CELL)
    assert errors == []
    assert "episodes 3 completed" in printed


def test_interrupting_the_kernel_gives_the_partial_report(kernel: Any) -> None:
    manager, client = kernel

    def on_output(text: str) -> None:
        if "two episodes done" in text:
            manager.interrupt_kernel()

    printed, errors = _run_cell(client, INTERRUPT_CELL, on_output)
    assert errors == []
    assert "interrupted cancelled True" in printed
