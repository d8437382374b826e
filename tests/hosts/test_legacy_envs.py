"""Envs rlmesh serves and we used to refuse (issue 12 item 29): duck-typed vector envs
and the legacy gym API, served by rt.serve_env, driven by our runtime and by rlmesh's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio._envhost import make_host
from rlmesh_trio._envhost._legacy import normalize_reset, normalize_step, reset_env
from rlmesh_trio._protocol import core_pb

from .._legacy_envs import LegacyCartPole, OldestCartPole, PoolStyleVector
from .._rlmesh_inproc import in_thread, rlmesh_server


def lean(obs: Any) -> int:
    return int(np.asarray(obs).reshape(-1)[2] > 0)


def lean_batch(obs: Any) -> Any:
    return (np.asarray(obs)[:, 2] > 0).astype(np.int64)


def episodes_of(report: Any) -> list[tuple[Any, int, float, bool, bool]]:
    return [(e.seed, e.steps, e.reward, e.terminated, e.truncated) for e in report.episodes]


async def served_run(env: Any, **route: Any) -> rt.RunReport:
    async with rt.serve_env(env, "127.0.0.1:0") as server:
        routes = [rt.Route(env=server.address, **route)]
        return await rt.run_routes(routes, handle_sigint=False)


# -- the normalisation rules --------------------------------------------------------------


def test_legacy_step_maps_done_to_terminated_unless_a_time_limit_says_truncated() -> None:
    assert normalize_step((1, 1.0, True, {}))[2:4] == (True, False)
    assert normalize_step((1, 1.0, True, {"TimeLimit.truncated": True}))[2:4] == (False, True)
    assert normalize_step((1, 1.0, False, {}))[2:4] == (False, False)
    five = (1, 1.0, False, True, {})
    assert normalize_step(five) is five
    with pytest.raises(ValueError, match="4 legacy gym values or 5 gymnasium values, got 3"):
        normalize_step((1, 2, 3))


def test_legacy_vector_steps_per_lane_from_list_or_dict_infos() -> None:
    dones = np.array([True, True, False])
    _, _, term, trunc, info = normalize_step(
        (None, [1, 1, 1], dones, [{"TimeLimit.truncated": True}, {"x": 5}, {}]), 3
    )
    assert term.tolist() == [False, True, False] and trunc.tolist() == [True, False, False]
    assert info["x"][1] == 5 and info["_x"].tolist() == [False, True, False]
    as_dict = {"TimeLimit.truncated": np.array([False, True, True])}
    _, _, term, trunc, _ = normalize_step((None, [1, 1, 1], dones, as_dict), 3)
    assert term.tolist() == [True, False, False] and trunc.tolist() == [False, True, False]


def test_resets_without_info_or_keywords() -> None:
    box = gym.spaces.Box(0, 1, (2,))
    assert normalize_reset(np.zeros(2), box)[1] == {}
    _obs, info = normalize_reset((np.zeros(2), {"a": 1}), box)
    assert info == {"a": 1}
    pair = gym.spaces.Tuple((box, gym.spaces.Dict({})))
    bare = (np.zeros(2), {})  # a Tuple(x, Dict) observation, not (obs, info)
    assert normalize_reset(bare, pair) == (bare, {})
    legacy = OldestCartPole()  # reset() takes no keyword: the seed goes to env.seed()
    first = reset_env(legacy, 7, {"ignored": True})
    np.testing.assert_array_equal(first, gym.make("CartPole-v1").reset(seed=7)[0])


def test_duck_vector_is_served_as_a_vector_endpoint() -> None:
    host = make_host(PoolStyleVector(3))
    contract = host.contract
    assert contract.num_envs == 3
    assert contract.autoreset_mode == core_pb.AutoresetMode.NEXT_STEP
    with pytest.raises(TypeError, match="single_action_space"):
        make_host(type("Half", (), {"num_envs": 2, "single_observation_space": None})())


# -- over a real served endpoint, our runtime -----------------------------------------


async def test_legacy_single_env_served_gives_gymnasium_episodes() -> None:
    ours = await served_run(LegacyCartPole(), model=lean, seeds=[1, 2, 3])
    reference = await served_run(gym.make("CartPole-v1"), model=lean, seeds=[1, 2, 3])
    assert episodes_of(ours) == episodes_of(reference)


async def test_a_reset_without_keywords_is_seeded_through_env_seed() -> None:
    ours = await served_run(OldestCartPole(), model=lean, seeds=[1, 2])
    reference = await served_run(gym.make("CartPole-v1"), model=lean, seeds=[1, 2])
    assert episodes_of(ours) == episodes_of(reference)


async def test_legacy_time_limit_is_a_truncation() -> None:
    report = await served_run(LegacyCartPole(limit=20), model=lean, seeds=[1])
    (episode,) = report.episodes
    assert (episode.steps, episode.truncated, episode.terminated) == (20, True, False)


@pytest.mark.parametrize("legacy", [False, True])
async def test_duck_vector_served_runs_next_step_episodes(legacy: bool) -> None:
    ours = await served_run(PoolStyleVector(2, legacy=legacy), model=lean, episodes=5)
    reference = await served_run(_seeded_gymnasium_vector(), model=lean, episodes=5)
    assert sorted(episodes_of(ours), key=str) == sorted(episodes_of(reference), key=str)


def _seeded_gymnasium_vector() -> gym.vector.SyncVectorEnv:
    venv = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(2)],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
    venv.reset(seed=11)
    return venv


async def test_legacy_and_duck_envs_run_in_process_too() -> None:
    report = await rt.run_routes(
        [
            rt.Route(env=LegacyCartPole(), model=lean, seeds=[1], route_id="legacy"),
            rt.Route(env=PoolStyleVector(2), model=lean, episodes=3, route_id="duck"),
        ],
        handle_sigint=False,
    )
    assert [o.status for o in report.routes] == ["completed", "completed"]


# -- rlmesh's own clients against our server (interop) -----------------------------------


@pytest.mark.interop
@pytest.mark.parametrize(
    ("make", "policy", "budget"),
    [
        (LegacyCartPole, lean, {"seeds": [1, 2, 3]}),
        (lambda: LegacyCartPole(limit=15), lean, {"seeds": [4, 5]}),
        (lambda: PoolStyleVector(2), lean_batch, {"episodes": 5}),
        (lambda: PoolStyleVector(2, legacy=True), lean_batch, {"episodes": 5}),
    ],
    ids=["legacy", "legacy-time-limit", "duck-vector", "duck-vector-legacy"],
)
async def test_rlmesh_run_agrees_with_rlmesh_own_server(
    make: Callable[[], Any], policy: Callable[[Any], Any], budget: dict[str, Any]
) -> None:
    rlmesh = pytest.importorskip("rlmesh")
    rlmesh_numpy = pytest.importorskip("rlmesh.numpy")
    async with rlmesh_server(make()) as address:
        theirs = await in_thread(lambda: rlmesh.run(rlmesh_numpy.Model(policy), address, **budget))
    async with rt.serve_env(make(), "127.0.0.1:0") as server:
        ours = await in_thread(
            lambda: rlmesh.run(rlmesh_numpy.Model(policy), server.address, **budget)
        )
    assert sorted(episodes_of(ours), key=str) == sorted(episodes_of(theirs), key=str)
    assert len(ours.episodes) == len(theirs.episodes) > 0


@pytest.mark.interop
async def test_rlmesh_remote_env_steps_a_legacy_env_on_our_server() -> None:
    rlmesh = pytest.importorskip("rlmesh")
    async with rt.serve_env(LegacyCartPole(limit=5), "127.0.0.1:0") as server:

        def client() -> list[tuple[bool, bool]]:
            env = rlmesh.RemoteEnv(server.address)
            env.reset(seed=1)
            flags = []
            for _ in range(5):
                _obs, _reward, terminated, truncated, _info = env.step(0 if _ % 2 else 1)
                flags.append((bool(terminated), bool(truncated)))
            env.close()
            return flags

        flags = await in_thread(client)
    assert flags[-1] == (False, True) and flags[:-1] == [(False, False)] * 4
