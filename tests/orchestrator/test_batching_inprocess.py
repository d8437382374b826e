"""In-process cross-route batching: routes sharing one policy object share one batcher."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gymnasium
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import Orchestrator


class RecordingPolicy:
    """The CartPole rule with a batched form; records every (observation, action) it gave."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[tuple[float, ...], int]] = Counter()
        self.single_calls = 0
        self.batch_calls = 0

    def _act(self, obs: np.ndarray) -> np.ndarray:
        actions = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)
        for row, action in zip(obs.tolist(), actions.tolist(), strict=True):
            self.seen[(tuple(row), action)] += 1
        return actions

    def predict(self, obs: np.ndarray) -> int:
        self.single_calls += 1
        return int(self._act(np.asarray(obs).reshape(1, -1))[0])

    def predict_batch(self, obs: np.ndarray) -> np.ndarray:
        self.batch_calls += 1
        return self._act(np.asarray(obs))


def _routes(model: Any, n: int = 8) -> list[rt.Route]:
    return [
        rt.Route(
            env=gymnasium.make("CartPole-v1"),
            model=model,
            seeds=[i, i + n],
            max_episode_steps=80,
            route_id=f"local-{i}",
        )
        for i in range(n)
    ]


def _per_route(report: rt.RunReport) -> list[tuple[str, int | None, int, float]]:
    return sorted(
        (route.route_id, ep.seed, ep.steps, ep.reward)
        for route in report.routes
        for ep in route.episodes
    )


async def test_routes_sharing_a_policy_get_grouped_with_the_same_actions() -> None:
    plain_policy, batched_policy = RecordingPolicy(), RecordingPolicy()
    plain = await Orchestrator(_routes(plain_policy), batch_predicts=False).run()
    batched = await Orchestrator(_routes(batched_policy), batch_predicts=True).run()
    assert plain.ok and batched.ok
    assert _per_route(batched) == _per_route(plain)
    assert batched_policy.seen == plain_policy.seen  # the same action for every observation
    assert plain_policy.batch_calls == 0
    assert batched_policy.batch_calls > 0  # the first window is grouped: one call, many routes
    rows_batched = sum(batched_policy.seen.values()) - batched_policy.single_calls
    assert rows_batched > batched_policy.batch_calls


async def test_a_shared_local_model_is_batched_too() -> None:
    policy = RecordingPolicy()
    model = rt.LocalModel(policy)
    report = await Orchestrator(_routes(model, n=4), batch_predicts=True).run()
    assert report.ok and policy.batch_calls > 0


async def test_torch_mlp_batched_in_process_matches_unbatched() -> None:
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(7)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)
    ).eval()
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)

    def act_batch(obs: Any) -> np.ndarray:
        rows = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))
        with torch.inference_mode():
            logits = net(rows)
            lean = rows[:, 2] + 0.5 * rows[:, 3]
            return (logits[:, 1] - logits[:, 0] + 40.0 * lean > 0).numpy().astype(np.int64)

    def act(obs: Any) -> int:
        return int(act_batch(np.asarray(obs, dtype=np.float32).reshape(1, -1))[0])

    policy = rt.policy(act, batched=act_batch)
    plain = await Orchestrator(_routes(policy)).run()
    batched = await Orchestrator(_routes(policy), batch_predicts=True).run()
    assert plain.ok and batched.ok
    assert _per_route(batched) == _per_route(plain)
