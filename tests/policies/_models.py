"""Small deterministic torch models, an env wrapper that logs what it was sent, and helpers.

Not a test module. ``MLP`` and ``MLP_POLICY`` are module-level so that
``rlmesh-trio serve-model tests.policies._models:MLP`` builds the same weights
in another process.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

import rlmesh_trio as rt

SEED = 7


def make_mlp(n_in: int = 4, n_out: int = 2, hidden: int = 16, seed: int = SEED) -> torch.nn.Module:
    """A float32 MLP whose weights depend only on ``seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Linear(n_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, n_out)
        )


MLP = make_mlp()
MLP_POLICY = rt.TorchPolicy(make_mlp())


class ForwardCounter:
    """Counts a module's forward passes and the rows they carried (a public forward hook)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.calls = 0
        self.rows = 0
        module.register_forward_pre_hook(self._seen)

    def _seen(self, module: Any, args: tuple[Any, ...]) -> None:
        self.calls += 1
        self.rows += int(args[0].shape[0])


class ActionLog(gym.Wrapper):
    """Records every (observation the model saw, action it sent) pair of a real env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.pairs: list[tuple[np.ndarray, Any]] = []
        self._last: np.ndarray | None = None

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._last = np.array(obs)
        return obs, info

    def step(self, action: Any) -> Any:
        assert self._last is not None
        self.pairs.append((self._last, action))
        obs, *rest = self.env.step(action)
        self._last = np.array(obs)
        return (obs, *rest)


def argmax_actions(module: torch.nn.Module, observations: list[np.ndarray]) -> list[int]:
    """What calling the module directly, one row at a time, picks."""
    with torch.no_grad():
        return [int(module(torch.as_tensor(obs)).argmax()) for obs in observations]


def logged_actions_match(logs: list[ActionLog], module: torch.nn.Module) -> int:
    """Assert every logged action is the module's own argmax; return how many were checked."""
    checked = 0
    for log in logs:
        assert log.pairs, "the env was never stepped"
        observations = [obs for obs, _ in log.pairs]
        assert [int(a) for _, a in log.pairs] == argmax_actions(module, observations)
        checked += len(log.pairs)
    return checked


def cartpole_logs(n: int) -> list[ActionLog]:
    return [ActionLog(gym.make("CartPole-v1")) for _ in range(n)]
