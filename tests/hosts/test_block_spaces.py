"""Envs of one kind: their blocks fuse (exactly the same spaces) and their contracts share
their spec objects (so a spec's codec and bytes are computed once for all of them)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import spaces
from rlmesh_trio._envhost import make_host
from rlmesh_trio._envhost._block import block_of, same_space
from rlmesh_trio.spaces._bytes import spec_bytes


def box(low: float = -1.0, high: float = 1.0, shape: tuple[int, ...] = (3,)) -> gym.spaces.Box:
    return gym.spaces.Box(low, high, shape, np.float32)


@pytest.mark.parametrize(
    ("a", "b", "alike"),
    [
        (box(), box(), True),  # equal values, distinct objects
        (box(), box(high=1.0000001), False),  # gymnasium's allclose calls these equal
        (box(), box(shape=(4,)), False),
        (box(), gym.spaces.Box(-1.0, 1.0, (3,), np.float64), False),
        (gym.spaces.Discrete(3), gym.spaces.Discrete(3), True),
        (gym.spaces.Discrete(3), gym.spaces.Discrete(3, start=1), False),
        (gym.spaces.Discrete(3), box(), False),
        (gym.spaces.MultiBinary(2), gym.spaces.MultiBinary(2), True),  # gymnasium's ==
    ],
)
def test_same_space_is_exact(a: Any, b: Any, alike: bool) -> None:
    assert same_space(a, b) is alike
    assert same_space(b, a) is alike


def test_cartpole_blocks_fuse_and_other_spaces_do_not() -> None:
    def block(env: Any) -> Any:
        found = block_of(make_host(env))
        assert found is not None
        return found

    first, second = block(gym.make("CartPole-v1")), block(gym.make("CartPole-v1"))
    assert first.fuses_with(second)
    assert not first.fuses_with(block(gym.make("MountainCar-v0")))


def test_contracts_of_envs_of_one_kind_share_their_specs() -> None:
    first, second = (make_host(gym.make("CartPole-v1")).contract.spec for _ in range(2))
    other = make_host(gym.make("MountainCar-v0")).contract.spec
    assert first is not None and second is not None and other is not None
    assert first.observation_space is second.observation_space
    assert first.action_space is second.action_space
    assert other.observation_space is not first.observation_space
    # What is shared is what from_gymnasium gives, byte for byte.
    assert first.observation_space == spaces.from_gymnasium(
        gym.make("CartPole-v1").observation_space
    )
    obs = first.observation_space
    assert obs is not None
    assert spec_bytes(obs) == bytes(obs) and spec_bytes(obs) is spec_bytes(obs)
