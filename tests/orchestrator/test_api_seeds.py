"""Seeds the wire cannot carry (int64) are refused up front, on every path alike."""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest

import rlmesh_trio as rt
from rlmesh_trio import RouteDriver, RouteSpec
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel

TOO_BIG = [2**64 + 5, 2**63, -(2**63) - 1]


class SeedRecorder(gymnasium.Wrapper):  # type: ignore[type-arg]
    """CartPole that remembers every seed its resets were given."""

    def __init__(self) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.seeds: list[int | None] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.seeds.append(seed)
        # CartPole seeds numpy, which takes no negative seed: keep the env valid, record the seed.
        return super().reset(seed=None if seed is None else seed % 2**32, options=options)


def _assert_names(error: rt.InvalidSpec, route_id: str, seed: int) -> None:
    text = str(error)
    assert f"route {route_id}" in text and str(seed) in text and "int64" in text


@pytest.mark.parametrize("seed", TOO_BIG)
def test_route_refuses_a_seed_outside_int64(seed: int) -> None:
    with pytest.raises(rt.InvalidSpec) as info:
        rt.Route(env="127.0.0.1:1", model="127.0.0.1:2", seeds=[1, seed], route_id="r7")
    _assert_names(info.value, "r7", seed)


@pytest.mark.parametrize("seed", TOO_BIG)
def test_shard_refuses_it_naming_the_route_it_was_dealt_to(seed: int) -> None:
    with pytest.raises(rt.InvalidSpec) as info:
        rt.shard(envs=["127.0.0.1:1", "127.0.0.1:3"], model=lambda o: 0, seeds=[0, seed])
    _assert_names(info.value, "route-1", seed)


@pytest.mark.parametrize("seed", TOO_BIG)
async def test_route_spec_and_driver_refuse_it(seed: int) -> None:
    spec = RouteSpec(route_id="drv", session_id="s", seeds=(seed,))
    with pytest.raises(rt.InvalidSpec) as info:
        spec.validate()
    _assert_names(info.value, "drv", seed)
    env = ScriptedEnv(episode_lengths=2)
    driver = RouteDriver(spec, env, ScriptedModel())
    with pytest.raises(rt.InvalidSpec):
        await driver.run()
    assert env.closes == [] and driver.report().episodes == ()


async def test_in_process_and_served_paths_refuse_it_alike() -> None:
    env = SeedRecorder()
    errors = []
    async with rt.serve_env(SeedRecorder(), "127.0.0.1:0") as server:
        for target in (env, server.address):
            with pytest.raises(rt.InvalidSpec) as info:
                await rt.run_routes([rt.Route(env=target, model=lambda o: 0, seeds=[2**64 + 5])])
            errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert env.seeds == []  # nothing reached the in-process env


async def test_int64_extremes_reach_a_served_env_unchanged() -> None:
    env = SeedRecorder()
    seeds = [2**63 - 1, -(2**63)]
    async with rt.serve_env(env, "127.0.0.1:0") as server:
        report = await rt.run_routes(
            [rt.Route(env=server.address, model=lambda o: 0, seeds=seeds, route_id="edge")]
        )
    assert env.seeds == seeds
    assert [ep.seed for ep in report.episodes] == seeds
    assert report.ok and report.total_episodes == 2


def test_cli_refuses_it_with_exit_2() -> None:
    from .._api_cli import run_demo

    seed = 2**64 + 5
    done = run_demo("--seeds", f"{seed},1")
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "route route-0" in line and str(seed) in line


def _lookahead(obs: Any) -> int:
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


@pytest.mark.interop
async def test_int64_max_seed_gives_rlmesh_served_and_in_process_the_same_episode() -> None:
    from .._rlmesh_procs import rlmesh_env

    seeds = [2**63 - 1, 2**62 + 3]
    local = await rt.run_routes(
        [rt.Route(env=gymnasium.make("CartPole-v1"), model=_lookahead, seeds=seeds)]
    )
    with rlmesh_env() as server:
        served = await rt.run_routes([rt.Route(env=server.address, model=_lookahead, seeds=seeds)])
    # CartPole's start state is the seed's: equal episodes mean the seed arrived whole.
    assert [(ep.seed, ep.steps, ep.reward) for ep in served.episodes] == [
        (ep.seed, ep.steps, ep.reward) for ep in local.episodes
    ]
    assert [ep.seed for ep in served.episodes] == seeds
