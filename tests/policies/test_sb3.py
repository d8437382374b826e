"""SB3Policy: the same actions as ``model.predict`` directly, whole batches per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

sb3 = pytest.importorskip("stable_baselines3")

import rlmesh_trio as rt  # noqa: E402

from ._calls import SHAPES, endpoint, env_spec, grouped, observations_of  # noqa: E402

CARTPOLE = gym.make("CartPole-v1")


@pytest.fixture(scope="module")
def ppo() -> Any:
    """A tiny PPO trained for one rollout on CartPole (built here: no downloads)."""
    model = sb3.PPO(
        "MlpPolicy",
        gym.make("CartPole-v1"),
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
        device="cpu",
    )
    return model.learn(total_timesteps=32)


def _direct(model: Any, observations: list[Any]) -> list[int]:
    return [int(model.predict(obs, deterministic=True)[0]) for obs in observations]


@pytest.mark.parametrize("where", ["local", "served"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_actions_are_the_models_predict(ppo: Any, where: str, shape: str) -> None:
    observations = observations_of(CARTPOLE, 10)
    async with endpoint(rt.SB3Policy(ppo), where) as model:
        actions = await SHAPES[shape](model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == _direct(ppo, observations)


async def test_a_saved_zip_loads_and_acts_the_same(ppo: Any, tmp_path: Path) -> None:
    path = tmp_path / "ppo.zip"
    ppo.save(path)
    observations = observations_of(CARTPOLE, 6)
    async with endpoint(rt.SB3Policy(str(path), algorithm="PPO", device="cpu"), "local") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == _direct(ppo, observations)


class CountingModel:
    """Our own stand-in holding a real PPO: counts the batches its predict gets."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.batches: list[int] = []

    def predict(self, obs: Any, **kwargs: Any) -> Any:
        self.batches.append(len(obs))
        return self.model.predict(obs, **kwargs)


async def test_a_group_is_one_predict_call(ppo: Any) -> None:
    counting = CountingModel(ppo)
    observations = observations_of(CARTPOLE, 6)
    async with endpoint(rt.SB3Policy(counting), "served") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert counting.batches == [6]
    assert [int(a) for a in actions] == _direct(ppo, observations)


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(rt.InvalidSpec, match="needs algorithm="):
        rt.SB3Policy(str(tmp_path / "x.zip"))
    with pytest.raises(rt.InvalidSpec, match="not a Stable-Baselines3 algorithm"):
        rt.SB3Policy(str(tmp_path / "x.zip"), algorithm="NoSuchAlgo")
    with pytest.raises(rt.InvalidSpec, match="no saved model"):
        rt.SB3Policy(str(tmp_path / "missing.zip"), algorithm="PPO")


def test_a_route_runs_on_an_sb3_model(ppo: Any) -> None:
    report = rt.run(
        rt.shard(envs=[gym.make("CartPole-v1")], model=rt.SB3Policy(ppo), seeds=range(2))
    )
    assert report.ok and report.total_episodes == 2
    assert np.isfinite(report.episodes[0].reward)


def test_a_failing_model_gives_the_routes_model_error_naming_the_policy(ppo: Any) -> None:
    class Broken(CountingModel):
        def predict(self, obs: Any, **kwargs: Any) -> Any:
            raise ValueError("no such observation")

    with pytest.raises(rt.RunFailed) as failed:
        rt.run(rt.shard(envs=[gym.make("CartPole-v1")], model=rt.SB3Policy(Broken(ppo)), seeds=[0]))
    error = failed.value.report.routes[0].error
    assert isinstance(error, rt.ModelRpcError)
    assert "PolicyError: SB3Policy(Broken) raised ValueError: no such observation" in str(error)
