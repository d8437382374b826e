"""Which envs' blocks a fused block may drive together: exactly the same spaces."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio._envhost import make_host
from rlmesh_trio._envhost._block import block_of, same_space


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
