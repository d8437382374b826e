"""Shared setup for the harness: Trio mode and in-process gRPC servers.

Copy this folder next to your code, point ``my_policy`` at your policy, and
run ``python -m pytest -q path/to/trio_test_harness``. Needs ``pytest`` and
``pytest-trio``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import gymnasium
import pytest
from my_policy import act

import rlmesh_trio as rt


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Run every `async def test_...` under Trio, like `trio_mode = true` in the pytest config,
    # but without depending on the config of whatever project this folder is copied into.
    for item in items:
        if inspect.iscoroutinefunction(getattr(item, "function", None)):
            item.add_marker(pytest.mark.trio)


@pytest.fixture
async def servers() -> AsyncIterator[tuple[list[str], str]]:
    """``(env_addresses, policy_address)``: two CartPole-v1 env servers and a model
    server running ``my_policy.act``, on loopback, stopped when the test ends.

    All three live in one fixture on purpose: they share one transport loop, and
    one exit stack stops them in reverse order when the test ends.
    """
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(rt.serve_model(act, "127.0.0.1:0"))
        envs = [
            await stack.enter_async_context(rt.serve_env(gymnasium.make("CartPole-v1")))
            for _ in range(2)
        ]
        yield [env.address for env in envs], model.address
