"""The server lifecycle exactly as rlmesh 0.1.0's ``EnvServer`` has it (issue 22, item 4).

* ``shutdown()`` before ``start()`` still closes the env;
* ``wait()`` before ``start()`` raises ``RuntimeError`` ("wait() called before start()");
* ``wait(-1)``, ``wait(nan)`` and ``wait(inf)`` raise ``ValueError``, before or after
  ``start()`` (rlmesh checks the timeout first: "timeout must be a non-negative
  finite float or None").

rlmesh's own server runs the same checks here (``[rlmesh]`` cases), so these tests
state its behaviour rather than our reading of it. Our ``ModelServer`` follows the
same rules (rlmesh's model side has no ``start``/``wait`` object to compare with).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio.inprocess._demo_policy import cartpole_policy

BAD_TIMEOUTS = [-1.0, math.nan, math.inf]


class ClosingCounter(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole that counts its ``close()`` calls."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        super().close()


def _rlmesh_env_server(env: Any) -> Any:
    rlmesh = pytest.importorskip("rlmesh")
    os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
    return rlmesh.EnvServer(env, "127.0.0.1:0")


def _our_env_server(env: Any) -> Any:
    return rt.EnvServer(env, "127.0.0.1:0")


def _our_model_server(env: Any) -> Any:
    return rt.ModelServer(cartpole_policy, "127.0.0.1:0")


ENV_SERVERS = [
    pytest.param(_our_env_server, id="ours"),
    pytest.param(_rlmesh_env_server, id="rlmesh", marks=pytest.mark.interop),
]
ANY_SERVERS = [*ENV_SERVERS, pytest.param(_our_model_server, id="ours-model")]
ServerFactory = Callable[[Any], Any]


@pytest.mark.parametrize("make", ENV_SERVERS)
def test_shutdown_before_start_still_closes_the_env(make: ServerFactory) -> None:
    env = ClosingCounter()
    server = make(env)
    server.shutdown()
    assert env.closes == 1


@pytest.mark.parametrize("make", ANY_SERVERS)
def test_wait_before_start_raises_runtime_error(make: ServerFactory) -> None:
    server = make(ClosingCounter())
    try:
        with pytest.raises(RuntimeError, match="before start"):
            server.wait()
        with pytest.raises(RuntimeError, match="before start"):
            server.wait(0.0)
    finally:
        server.shutdown()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=["minus-one", "nan", "inf"])
@pytest.mark.parametrize("make", ANY_SERVERS)
def test_wait_refuses_a_negative_or_non_finite_timeout_before_start(
    make: ServerFactory, timeout: float
) -> None:
    server = make(ClosingCounter())
    try:
        with pytest.raises(ValueError, match="timeout"):
            server.wait(timeout)
    finally:
        server.shutdown()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=["minus-one", "nan", "inf"])
@pytest.mark.parametrize("make", ANY_SERVERS)
def test_wait_refuses_a_negative_or_non_finite_timeout_while_serving(
    make: ServerFactory, timeout: float
) -> None:
    server = make(ClosingCounter())
    server.start()
    try:
        with pytest.raises(ValueError, match="timeout"):
            server.wait(timeout)
        assert server.wait(0.0) is False  # still serving: the refusal stopped nothing
    finally:
        server.shutdown()
    assert server.wait(0.0) is True
