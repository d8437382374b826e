"""Routes that cannot travel to a shard: the error names the part that does not pickle
(env, model or hooks), and with Ray it comes before Ray starts."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rlmesh_trio as rt
from rlmesh_trio import run_distributed
from rlmesh_trio.testing import RecordingHooks


def make_cartpole() -> gym.Env:  # type: ignore[type-arg]
    return gym.make("CartPole-v1")


def first_action(obs: object) -> int:
    return 0


@pytest.mark.parametrize(
    ("route", "part"),
    [
        (rt.Route(env=lambda: make_cartpole(), model=first_action, seeds=[1], route_id="e"), "env"),
        (rt.Route(env=make_cartpole, model=lambda obs: 0, seeds=[1], route_id="m"), "model"),
        (
            rt.Route(
                env=make_cartpole, model=first_action, seeds=[1], route_id="h",
                hooks=lambda route_id: RecordingHooks(),
            ),
            "hooks",
        ),
    ],
)  # fmt: skip
def test_the_error_names_what_does_not_pickle(route: rt.Route, part: str) -> None:
    with pytest.raises(rt.InvalidSpec) as info:
        run_distributed([route], "processes")
    message = str(info.value)
    assert (
        f"route {route.route_id}: cannot be sent to a shard: its {part} does not pickle" in message
    )
    assert f"({part}: " in message


def test_env_and_model_both_named() -> None:
    route = rt.Route(env=lambda: make_cartpole(), model=lambda obs: 0, seeds=[1], route_id="b")
    with pytest.raises(rt.InvalidSpec, match="its env and its model do not pickle"):
        run_distributed([route], "processes")


@pytest.mark.ray
def test_with_ray_the_check_comes_before_ray_starts() -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray already running in this process")
    route = rt.Route(env=make_cartpole, model=lambda obs: 0, seeds=[1], route_id="r")
    with pytest.raises(rt.InvalidSpec, match="its model does not pickle"):
        run_distributed([route], "ray")
    assert not ray.is_initialized()
