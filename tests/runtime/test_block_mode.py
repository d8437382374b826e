"""Issue 33: routes over many lanes run as one block (one predict and one step per round).

Shape B is one route over a list of envs, shape C one route over a gymnasium
``VectorEnv`` with autoreset DISABLED. Every episode (seed, steps, return,
terminated, truncated) must equal a plain gymnasium loop over one env calling
the same policy, with and without the runtime's caps; a lane that fails fails
the route naming that lane and keeps the finished episodes; a ledgered run
cut by a failing lane and resumed keeps every seed exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import RuntimeHooks
from rlmesh_trio._errors import EnvRpcError

from .._block_helpers import Breaks

# The torch MLP cases need the torch extra (the minimum-versions run has none).
torch = pytest.importorskip("torch")

LANES = 6


def _mlp() -> torch.nn.Module:
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    return net.eval()


def _cart_batch(obs: Any) -> np.ndarray:
    """A deterministic numpy CartPole policy (the balancing rule): long episodes."""
    obs = np.asarray(obs)
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def _pendulum_batch(obs: Any) -> np.ndarray:
    obs = np.asarray(obs, dtype=np.float32)
    return np.clip(-2.0 * obs[:, 2:3] - obs[:, 0:1], -2.0, 2.0).astype(np.float32)


CART = rt.policy(batched=_cart_batch)
PENDULUM = rt.policy(batched=_pendulum_batch)


def _act(model: Any, obs: Any) -> Any:
    row = np.asarray(obs, dtype=np.float32)[None]
    if isinstance(model, torch.nn.Module):
        with torch.inference_mode():
            return int(model(torch.from_numpy(row)).argmax(-1)[0])
    return model.predict_batch.fn(row)[0]


def _plain(env_id: str, model: Any, seed: int, cap: int | None) -> tuple[Any, ...]:
    """One episode of a plain gymnasium loop: (seed, steps, return, terminated, truncated)."""
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(_act(model, obs))
        steps += 1
        total += float(reward)
        if terminated or truncated:
            return seed, steps, total, bool(terminated), bool(truncated)
        if cap is not None and steps >= cap:
            return seed, steps, total, False, True


def _env(shape: str, env_id: str, lanes: int = LANES) -> Any:
    if shape == "B":
        return [gym.make(env_id) for _ in range(lanes)]
    return gym.make_vec(
        env_id,
        lanes,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
    )


def _failed(routes: list[rt.Route], **kwargs: Any) -> rt.RunReport:
    """The report of a run whose route fails (``rt.run`` raises it in ``RunFailed``)."""
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(routes, **kwargs)
    return failed.value.report


def _episodes(report: rt.RunReport) -> list[tuple[Any, ...]]:
    rows = [(e.seed, e.steps, e.reward, e.terminated, e.truncated) for e in report.episodes]
    return sorted(rows)


class _Counting(RuntimeHooks):
    """Counts episode events (they must still fire per episode in the block mode)."""

    def __init__(self) -> None:
        self.started = 0
        self.completed: list[int | None] = []

    async def episode_started(self, event: Any) -> None:
        self.started += 1

    async def episode_completed(self, event: Any) -> None:
        self.completed.append(event.result.seed)


@pytest.mark.parametrize("shape", ["B", "C"])
@pytest.mark.parametrize(
    ("env_id", "policy", "cap"),
    [
        ("CartPole-v1", "mlp", None),
        ("CartPole-v1", "numpy", 37),
        ("Pendulum-v1", "numpy", None),
        ("Pendulum-v1", "numpy", 50),
    ],
)
def test_block_episodes_equal_a_plain_gymnasium_loop(
    shape: str, env_id: str, policy: str, cap: int | None
) -> None:
    model: Any = _mlp() if policy == "mlp" else (CART if env_id == "CartPole-v1" else PENDULUM)
    seeds = list(range(100, 100 + 2 * LANES + 3))  # more episodes than lanes, uneven
    hooks = _Counting()
    report = rt.run(
        [
            rt.Route(
                env=_env(shape, env_id),
                model=model,
                seeds=seeds,
                max_episode_steps=cap,
                trial_index_base=10,
                route_id="r",
            )
        ],
        hooks=hooks,
    )
    assert report.ok, report.routes[0].error
    assert _episodes(report) == sorted(_plain(env_id, model, s, cap) for s in seeds)
    assert sorted(e.trial for e in report.episodes) == list(range(10, 10 + len(seeds)))
    assert sorted(hooks.completed) == seeds  # type: ignore[type-var]
    assert hooks.started == len(seeds)
    assert report.total_steps == sum(e.steps for e in report.episodes)


def test_a_disabled_vector_env_with_a_step_hook_is_still_refused() -> None:
    class Stepping(RuntimeHooks):
        async def step_completed(self, event: Any) -> None:
            pass

    report = _failed(
        [rt.Route(env=_env("C", "CartPole-v1"), model=CART, seeds=[1, 2], route_id="c")],
        hooks=Stepping(),
    )
    error = report.routes[0].error
    assert isinstance(error, rt.InvalidSpec)
    assert "as one block" in str(error)


def test_a_failing_lane_names_itself_and_keeps_finished_episodes() -> None:
    envs = [gym.make("CartPole-v1") for _ in range(LANES)]
    envs[3] = Breaks(envs[3], after=120, message="lane broke")
    report = _failed([rt.Route(env=envs, model=CART, seeds=list(range(40)), max_episode_steps=20)])
    outcome = report.routes[0]
    error = outcome.error
    assert isinstance(error, EnvRpcError)
    assert error.env_index == 3
    assert "on env_index 3" in str(error)
    assert "step failed: RuntimeError: lane broke" in str(error)
    assert outcome.report is not None and len(outcome.report.episodes) >= LANES


@pytest.mark.parametrize("shape", ["B", "C"])
def test_an_invalid_action_names_its_lane(shape: str) -> None:
    def bad(obs: Any) -> np.ndarray:
        actions = np.zeros(len(obs), dtype=np.int64)
        actions[-1] = 5
        return actions

    report = _failed([rt.Route(env=_env(shape, "CartPole-v1"), model=rt.policy(batched=bad))])
    error = report.routes[0].error
    assert isinstance(error, EnvRpcError)
    assert error.env_index == LANES - 1
    assert "[InvalidAction] $: value 5 not in range [0, 2)" in str(error)


def test_a_nan_box_action_names_its_lane() -> None:
    def nan(obs: Any) -> np.ndarray:
        actions = np.zeros((len(obs), 1), dtype=np.float32)
        actions[2, 0] = np.nan
        return actions

    report = _failed([rt.Route(env=_env("B", "Pendulum-v1"), model=rt.policy(batched=nan))])
    error = report.routes[0].error
    assert isinstance(error, EnvRpcError)
    assert error.env_index == 2
    assert "Box value at element 0 is NaN" in str(error)


def test_a_cut_ledgered_block_run_resumes_every_seed_exactly_once(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    seeds = list(range(30))

    def routes(armed: bool) -> list[rt.Route]:
        envs = [gym.make("CartPole-v1") for _ in range(LANES)]
        envs[2] = Breaks(envs[2], after=70, message="lane broke", armed=armed)
        return [rt.Route(env=envs, model=CART, seeds=seeds, max_episode_steps=25, route_id="L")]

    first = _failed(routes(armed=True), ledger=ledger)
    assert not first.ok
    done = {e.seed for e in first.episodes}
    assert 0 < len(done) < len(seeds)
    second = rt.run(routes(armed=False), ledger=ledger, resume=True)
    assert second.ok, second.routes[0].error
    got = sorted(e.seed for e in second.episodes)
    assert got == seeds  # type: ignore[comparison-overlap]
    assert _episodes(second) == sorted(_plain("CartPole-v1", CART, s, 25) for s in seeds)


class _ActionTypes(gym.Wrapper):  # type: ignore[type-arg]
    """Records the type (and dtype) of every action its env is handed."""

    def __init__(self, env: gym.Env) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        self.seen: set[tuple[type, Any]] = set()

    def step(self, action: Any) -> Any:
        self.seen.add((type(action), getattr(action, "dtype", None)))
        return self.env.step(action)


@pytest.mark.parametrize("fused", [False, True], ids=["one-route", "fused-routes"])
@pytest.mark.parametrize(
    ("env_id", "policy", "expected"),
    [
        ("CartPole-v1", CART, (np.int64, np.dtype(np.int64))),
        ("Pendulum-v1", PENDULUM, (np.ndarray, np.dtype(np.float32))),
    ],
)
def test_a_block_hands_each_env_its_row_in_the_spaces_dtype(
    fused: bool, env_id: str, policy: Any, expected: tuple[type, Any]
) -> None:
    """What gymnasium's vector envs hand: a Discrete action as a numpy integer scalar."""
    envs = [_ActionTypes(gym.make(env_id)) for _ in range(3)]
    seeds = list(range(6))
    routes = (
        rt.shard(envs=envs, model=policy, seeds=seeds, max_episode_steps=20)
        if fused
        else [rt.Route(env=envs, model=policy, seeds=seeds, max_episode_steps=20)]
    )
    report = rt.run(routes)
    assert report.ok
    assert report.total_steps == 6 * 20
    for env in envs:
        assert env.seen == {expected}
