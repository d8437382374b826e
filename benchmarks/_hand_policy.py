"""The policy and seeding every row of ``hand_loop.py`` shares.

:data:`MODULE` is a torch ``nn.Module``: ``_torch_mlp.py``'s 4-256-256-2 MLP
(fixed seeded weights, one thread) whose logits carry the CartPole balancing
rule as a bias, so ``argmax`` over them is exactly ``_torch_mlp.act_tensor``
and episodes run to CartPole-v1's 500-step cap. Every row takes its actions
as ``argmax(MODULE(rows))``: the hand loops through :func:`act`, ours through
the module itself (``model=MODULE``), Stable-Baselines3 through
:class:`SB3Predictor`, rlmesh 0.1.0 through :func:`rlmesh_model`.

:class:`SeedQueue` gives the rows that cannot pass a seed per episode
(Stable-Baselines3's ``DummyVecEnv`` and rlmesh 0.1.0's run over an
autoresetting vector env reset their envs with no seed) the same seeds: each
reset takes the next seed of one queue shared by the lanes, so the episodes
of a run are those of seeds ``0 .. n-1`` whichever lane runs them.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import _torch_mlp  # beside this file (benchmarks/ is on sys.path)
import gymnasium as gym
import numpy as np
import torch

ENV_ID = "CartPole-v1"
LANES = 32


class BalancedMLP(torch.nn.Module):
    """``_torch_mlp``'s network, its logits biased by ``40 * (theta + 0.5 * theta_dot)``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _torch_mlp.build_network()

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        logits = self.net(rows)
        lean = rows[:, 2] + 0.5 * rows[:, 3]
        # argmax picks 1 iff l1 + 40 * lean > l0 (ties go to 0): _torch_mlp.act_tensor's rule.
        return torch.stack((logits[:, 0], logits[:, 1] + 40.0 * lean), dim=1)


MODULE = BalancedMLP().eval()


def act(obs: Any) -> np.ndarray:
    """``(R, 4)`` observations -> ``(R,)`` int64 actions: one forward, argmax."""
    rows = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))
    with torch.inference_mode():
        return MODULE(rows).argmax(dim=1).numpy()


class SB3Predictor:
    """The smallest object Stable-Baselines3's ``evaluate_policy`` accepts (``predict``)."""

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Any]:
        return act(observation), state


def rlmesh_model() -> Any:
    """The module as an ``rlmesh.torch.Model`` (one forward per batch of lanes)."""
    import rlmesh.torch as rtorch

    class TorchMLP(rtorch.Model):  # type: ignore[misc]
        def predict(self, obs: Any) -> Any:
            rows = torch.as_tensor(obs, dtype=torch.float32).reshape(1, -1)
            with torch.inference_mode():
                return int(MODULE(rows).argmax(dim=1)[0])

        def predict_batch(self, obs: Any) -> Any:
            with torch.inference_mode():
                return MODULE(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1)

    return TorchMLP()


class SeedQueue:
    """Seeds handed out in order to whichever lane resets next (``None`` once spent)."""

    def __init__(self, seeds: Iterable[int]) -> None:
        self._seeds = collections.deque(seeds)

    def next(self) -> int | None:
        return self._seeds.popleft() if self._seeds else None


class QueuedSeeds(gym.Wrapper):  # type: ignore[type-arg]
    """Resets its env with the queue's next seed when the caller passes none."""

    def __init__(self, env: gym.Env, queue: SeedQueue) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self._queue = queue

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self.env.reset(seed=self._queue.next() if seed is None else seed, options=options)


def make_env(max_steps: int | None) -> gym.Env:  # type: ignore[type-arg]
    """One CartPole env (``max_steps`` overrides its 500-step cap, for smoke runs)."""
    if max_steps is None:
        return gym.make(ENV_ID)
    return gym.make(ENV_ID, max_episode_steps=max_steps)


def seeds_for(episodes_per_lane: int) -> list[int]:
    """The run's seeds: lane ``l`` runs seeds ``l, l + 32, ...`` where lanes are dealt."""
    return list(range(LANES * episodes_per_lane))
