"""JaxPolicy: the same actions as calling the jitted function directly, one call per group."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import rlmesh_trio as rt  # noqa: E402

from ._calls import SHAPES, endpoint, env_spec, grouped, observations_of  # noqa: E402

CARTPOLE = gym.make("CartPole-v1")


def _params() -> dict[str, Any]:
    rng = np.random.default_rng(3)
    return {
        "w": jnp.asarray(rng.normal(size=(4, 2)).astype(np.float32)),
        "b": jnp.asarray(np.float32([0.1, -0.1])),
    }


@jax.jit
def logits(params: dict[str, Any], obs: Any) -> Any:
    return obs @ params["w"] + params["b"]


def _direct(params: dict[str, Any], observations: list[Any]) -> list[int]:
    return [int(jnp.argmax(logits(params, jnp.asarray(obs)))) for obs in observations]


@pytest.mark.parametrize("where", ["local", "served"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_actions_are_the_functions_argmax(where: str, shape: str) -> None:
    params = _params()
    observations = observations_of(CARTPOLE, 10)
    async with endpoint(rt.JaxPolicy(logits, params=params), where) as model:
        actions = await SHAPES[shape](model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == _direct(params, observations)


async def test_grouped_predicts_are_one_call_padded_to_a_power_of_two() -> None:
    params = _params()
    shapes: list[tuple[int, ...]] = []

    def counted(p: Any, obs: Any) -> Any:
        shapes.append(tuple(obs.shape))
        return logits(p, obs)

    observations = observations_of(CARTPOLE, 5)
    policy = rt.JaxPolicy(counted, params=params, jit=False)
    async with endpoint(policy, "local") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert shapes == [(8, 4)]  # one call; 5 rows padded to 8, the extra rows dropped
    assert [int(a) for a in actions] == _direct(params, observations)


def test_a_route_runs_on_a_jax_policy_and_a_failure_names_it() -> None:
    report = rt.run(
        rt.shard(
            envs=[gym.make("CartPole-v1")],
            model=rt.JaxPolicy(logits, params=_params()),
            seeds=range(2),
        )
    )
    assert report.ok and report.total_episodes == 2
    broken = rt.JaxPolicy(logits, params={"w": jnp.zeros((5, 2)), "b": jnp.zeros(2)})
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(rt.shard(envs=[gym.make("CartPole-v1")], model=broken, seeds=[0]))
    assert "PolicyError: JaxPolicy(logits) raised" in str(failed.value.report.routes[0].error)
