"""Issue 33 shape A: routes sharing one in-process policy run as ONE fused block by default.

``rt.shard(envs=[N env objects], model=policy, seeds=...)`` makes N one-env
routes over one policy object; with default settings one task drives them
all (one batched predict and one step of every route's env per round).
Every episode (seed, steps, return, terminated, truncated) must equal a
plain gymnasium loop over one env with the same policy, with and without
caps; ``batch_predicts=False`` takes the per-route path and gives the same
episodes; a route whose env raises fails naming the route and its lane, its
siblings end ``RouteCancelled`` naming it, finished episodes are kept; a
cut ledgered fused run resumes every seed exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio import Orchestrator, RuntimeHooks
from rlmesh_trio._errors import EnvRpcError, OperationTimeout, RouteCancelled

from .._block_helpers import Breaks

# The torch MLP cases need the torch extra (the minimum-versions run has none).
torch = pytest.importorskip("torch")


def _mlp() -> torch.nn.Module:
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    return net.eval()


class _Calls:
    """Counts the policy's batched calls and the rows they carried."""

    def __init__(self) -> None:
        self.calls = 0
        self.rows = 0


def _counted_mlp() -> tuple[torch.nn.Module, _Calls]:
    net, seen = _mlp(), _Calls()

    def hook(_module: Any, args: Any, _output: Any) -> None:
        seen.calls += 1
        seen.rows += int(args[0].shape[0])

    net.register_forward_hook(hook)
    return net, seen


def _balance(obs: np.ndarray) -> np.ndarray:
    """A deterministic numpy CartPole policy (the balancing rule): long episodes."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def _counted_numpy() -> tuple[Any, _Calls]:
    seen = _Calls()

    def batched(obs: Any) -> np.ndarray:
        obs = np.asarray(obs)
        seen.calls += 1
        seen.rows += len(obs)
        return _balance(obs)

    return rt.policy(batched=batched), seen


def _act(kind: str, model: Any, obs: Any) -> int:
    row = np.asarray(obs, dtype=np.float32)[None]
    if kind == "mlp":
        with torch.inference_mode():
            return int(model(torch.from_numpy(row)).argmax(-1)[0])
    return int(_balance(row)[0])


def _plain(kind: str, model: Any, seed: int, cap: int | None) -> tuple[Any, ...]:
    """One episode of a plain gymnasium loop: (seed, steps, return, terminated, truncated)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    steps, total = 0, 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(_act(kind, model, obs))
        steps += 1
        total += float(reward)
        if terminated or truncated:
            return seed, steps, total, bool(terminated), bool(truncated)
        if cap is not None and steps >= cap:
            return seed, steps, total, False, True


def _episodes(report: rt.RunReport) -> list[tuple[Any, ...]]:
    rows = [(e.seed, e.steps, e.reward, e.terminated, e.truncated) for e in report.episodes]
    return sorted(rows)


def _model(kind: str) -> tuple[Any, _Calls]:
    return _counted_mlp() if kind == "mlp" else _counted_numpy()


def _failed(routes: list[rt.Route], **kwargs: Any) -> rt.RunFailed:
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(routes, **kwargs)
    return failed.value


@pytest.mark.parametrize("n", [32, 5])
@pytest.mark.parametrize(("kind", "cap"), [("mlp", None), ("numpy", 37), ("numpy", None)])
def test_fused_episodes_equal_a_plain_gymnasium_loop(n: int, kind: str, cap: int | None) -> None:
    model, seen = _model(kind)
    seeds = list(range(200, 200 + 2 * n + 3))  # uneven: some routes run one more episode
    envs = [gym.make("CartPole-v1") for _ in range(n)]
    routes = rt.shard(envs, model, seeds, max_episode_steps=cap, trial_index_base=10)
    report = rt.run(routes)
    calls, rows = seen.calls, seen.rows  # before the plain loop calls the model too
    assert report.ok, [r.error for r in report.routes]
    assert _episodes(report) == sorted(_plain(kind, model, s, cap) for s in seeds)
    assert sorted(e.trial for e in report.episodes) == list(range(10, 10 + len(seeds)))
    steps = sum(e.steps for e in report.episodes)
    assert report.total_steps == steps
    for outcome, route in zip(report.routes, routes, strict=True):
        assert outcome.report is not None
        assert sorted(e.seed for e in outcome.report.episodes) == sorted(route.seeds or ())
        assert outcome.report.total_steps == sum(e.steps for e in outcome.report.episodes)
    # The fused path: one batched call per round over every running route's row
    # (the per-route path makes one call per step).
    assert rows == steps
    longest = max(sum(e.steps for e in o.report.episodes) for o in report.routes if o.report)
    assert calls <= longest + 1
    assert calls < steps / min(n, 4)


@pytest.mark.parametrize("kind", ["mlp", "numpy"])
def test_opting_out_takes_the_per_route_path_with_the_same_episodes(kind: str) -> None:
    model, seen = _model(kind)
    seeds = list(range(13))
    routes = rt.shard([gym.make("CartPole-v1") for _ in range(5)], model, seeds)
    report = rt.run(routes, batch_predicts=False)
    calls = seen.calls
    assert report.ok
    assert _episodes(report) == sorted(_plain(kind, model, s, None) for s in seeds)
    assert calls == sum(e.steps for e in report.episodes)  # one predict per step


def test_a_route_with_a_step_hook_takes_its_own_loop_with_the_same_episodes() -> None:
    class Stepping(RuntimeHooks):
        def __init__(self) -> None:
            self.steps = 0

        async def step_completed(self, event: Any) -> None:
            self.steps += 1

    model, seen = _counted_numpy()
    hooks = Stepping()
    seeds = list(range(9))
    report = rt.run(rt.shard([gym.make("CartPole-v1") for _ in range(3)], model, seeds), hooks)
    assert report.ok
    steps = sum(e.steps for e in report.episodes)
    assert hooks.steps == steps and seen.calls == steps
    assert _episodes(report) == sorted(_plain("numpy", model, s, None) for s in seeds)


def test_a_failing_env_fails_its_route_and_cancels_the_siblings() -> None:
    model, _ = _counted_numpy()
    envs: list[Any] = [gym.make("CartPole-v1") for _ in range(6)]
    envs[3] = Breaks(envs[3], after=60, message="env broke")
    routes = rt.shard(envs, model, range(60), max_episode_steps=20)
    failed = _failed(routes)
    assert "route-3" in str(failed)
    report = failed.report
    outcome = report.routes[3]
    assert outcome.status == "failed"
    error = outcome.error
    assert isinstance(error, EnvRpcError)
    assert error.env_index == 0
    assert "on env_index 0" in str(error)
    assert "step failed: RuntimeError: env broke" in str(error)
    assert outcome.report is not None and len(outcome.report.episodes) == 2  # 40 steps done
    for k, sibling in enumerate(report.routes):
        if k == 3:
            continue
        assert sibling.status == "cancelled"
        assert isinstance(sibling.error, RouteCancelled)
        assert "route-3" in str(sibling.error)
        assert sibling.report is not None and len(sibling.report.episodes) >= 2
    assert _episodes(report) == sorted(
        _plain("numpy", model, e.seed, 20) for e in report.episodes if e.seed is not None
    )


def test_a_cut_ledgered_fused_run_resumes_every_seed_exactly_once(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    seeds = list(range(40))
    model, _ = _counted_numpy()

    def routes(armed: bool) -> list[rt.Route]:
        envs: list[Any] = [gym.make("CartPole-v1") for _ in range(5)]
        envs[2] = Breaks(envs[2], after=70, message="env broke", armed=armed)
        return rt.shard(envs, model, seeds, max_episode_steps=25)

    first = _failed(routes(armed=True), ledger=ledger).report
    done = {e.seed for e in first.episodes}
    assert 0 < len(done) < len(seeds)
    second = rt.run(routes(armed=False), ledger=ledger, resume=True)
    assert second.ok, [r.error for r in second.routes]
    assert sorted(e.seed for e in second.episodes) == seeds  # type: ignore[comparison-overlap]
    assert _episodes(second) == sorted(_plain("numpy", model, s, 25) for s in seeds)
    lines = [line for line in ledger.read_text().splitlines() if '"episode"' in line]
    assert len(lines) == len(seeds)


@pytest.mark.parametrize(
    ("options", "fused"),
    [({"max_concurrency": 2}, True), ({"on_failure": "isolate"}, False), ({"retries": 1}, False)],
)
def test_concurrency_caps_fuse_and_isolate_or_retries_fall_back(
    options: dict[str, Any], fused: bool
) -> None:
    model, seen = _counted_numpy()
    seeds = list(range(11))
    report = rt.run(rt.shard([gym.make("CartPole-v1") for _ in range(5)], model, seeds), **options)
    calls = seen.calls
    assert report.ok
    assert _episodes(report) == sorted(_plain("numpy", model, s, None) for s in seeds)
    steps = sum(e.steps for e in report.episodes)
    assert (calls < steps) if fused else (calls == steps)


async def test_cancelling_a_fused_run_cancels_every_route_and_keeps_their_episodes() -> None:
    class StopAfter(RuntimeHooks):
        def __init__(self) -> None:
            self.completed = 0
            self.orchestrator: Orchestrator | None = None

        async def episode_completed(self, event: Any) -> None:
            self.completed += 1
            if self.completed == 20 and self.orchestrator is not None:
                self.orchestrator.cancel("enough")

    model, _ = _counted_numpy()
    hooks = StopAfter()
    routes = rt.shard([gym.make("CartPole-v1") for _ in range(5)], model, range(10_000))
    orchestrator = Orchestrator(routes, hooks=hooks, handle_sigint=False)
    hooks.orchestrator = orchestrator
    report = await orchestrator.run()
    assert [o.status for o in report.routes] == ["cancelled"] * 5
    for outcome in report.routes:
        assert isinstance(outcome.error, RouteCancelled) and "enough" in str(outcome.error)
    assert len(report.episodes) >= 20


async def test_a_fused_predict_timeout_names_the_route_and_the_others_of_its_call(
    mock_clock: trio.testing.MockClock,
) -> None:
    calls = 0

    def batched(obs: Any) -> np.ndarray:
        nonlocal calls
        calls += 1
        if calls == 5:
            # An inline call that "takes" 10 s of the run's clock (which moves only here:
            # the envs' first calls run in threads): past the 1 s predict limit.
            mock_clock.jump(10.0)
        return _balance(np.asarray(obs))

    limits = rt.Limits(model_predict_timeout=1.0)
    envs = [gym.make("CartPole-v1") for _ in range(6)]
    routes = rt.shard(envs, rt.policy(batched=batched), range(60), limits=limits)
    with pytest.raises(rt.RunFailed) as failed:
        await Orchestrator(routes, handle_sigint=False).run()
    error = failed.value.__cause__
    # The first route of the call fails, named as on its own loop; the rest of the call
    # is named too (and every sibling is cancelled naming the failed route).
    assert isinstance(error, OperationTimeout), error
    assert error.route_id == "route-0"
    assert error.operation == "model.predict"
    assert error.component_id == "model"
    assert error.step == 4  # four steps of its one lane done when the fifth predict ran
    assert error.fused_with == tuple(f"route-{k}" for k in range(1, 6))
    assert "fused:" not in str(error)
    assert "one fused call with routes route-1, route-2, route-3 and 2 more" in str(error)
    report = failed.value.report
    assert report.routes[0].status == "failed"
    for sibling in report.routes[1:]:
        assert sibling.status == "cancelled"
        assert isinstance(sibling.error, RouteCancelled) and "route-0" in str(sibling.error)
