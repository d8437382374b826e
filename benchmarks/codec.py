"""Codec throughput: encode+decode time for three representative values.

Run: ``python benchmarks/codec.py`` (from the repository root). Prints the
median of many timed repetitions for:

* a CartPole observation, one lane (target: under 10 us encode+decode);
* a batch of 16 uint8 84x84x3 images, stacked form (target: >= 1 GB/s);
* a nested Dict observation, one lane, per-lane form.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rlmesh_trio.spaces import (
    decode,
    decode_batch,
    decode_stacked,
    encode,
    encode_batch,
    encode_stacked,
    from_gymnasium,
)


def median_seconds(fn: Callable[[], object], *, inner: int, rounds: int = 31) -> float:
    """Median over ``rounds`` of the mean time of ``inner`` back-to-back calls."""
    fn()  # warm the spec cache and numpy
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def main() -> None:
    env = gym.make("CartPole-v1")
    cart_spec = from_gymnasium(env.observation_space)
    obs, _ = env.reset(seed=0)
    env.close()

    def cartpole() -> object:
        return decode(cart_spec, encode(cart_spec, obs))

    t = median_seconds(cartpole, inner=2000)
    print(f"CartPole observation, 1 lane, encode+decode: {t * 1e6:.2f} us")

    img_space = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    img_spec = from_gymnasium(img_space)
    batch = np.random.default_rng(0).integers(0, 256, (16, 84, 84, 3), dtype=np.uint8)
    nbytes = batch.nbytes

    def images_stacked() -> object:
        return decode_stacked(img_spec, encode_stacked(img_spec, batch, 16), 16)

    lanes = list(batch)

    def images_lanes() -> object:
        return decode_batch(img_spec, encode_batch(img_spec, lanes), 16)

    t = median_seconds(images_stacked, inner=50)
    print(
        f"16 x uint8 84x84x3 images ({nbytes / 1e6:.2f} MB), stacked, encode+decode: "
        f"{t * 1e6:.1f} us = {nbytes / t / 1e9:.2f} GB/s"
    )
    t = median_seconds(images_lanes, inner=50)
    print(
        f"16 x uint8 84x84x3 images, per-lane lists, encode+decode: "
        f"{t * 1e6:.1f} us = {nbytes / t / 1e9:.2f} GB/s"
    )

    nested = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1, 1, (3,), np.float32),
            "img": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "mode": gym.spaces.Discrete(4),
            "flags": gym.spaces.MultiBinary(5),
            "inner": gym.spaces.Dict(
                {
                    "md": gym.spaces.MultiDiscrete([3, 4]),
                    "note": gym.spaces.Text(8),
                    "pair": gym.spaces.Tuple(
                        (gym.spaces.Discrete(2), gym.spaces.Box(-5, 5, (2,), np.float64))
                    ),
                }
            ),
        }
    )
    nested.seed(0)
    nested_spec = from_gymnasium(nested)
    value = nested.sample()

    def nested_one() -> object:
        return decode(nested_spec, encode(nested_spec, value))

    t = median_seconds(nested_one, inner=500)
    print(f"nested Dict (8 leaves), 1 lane, encode+decode: {t * 1e6:.2f} us")

    values8 = [nested.sample() for _ in range(8)]

    def nested_batch() -> object:
        return decode_batch(nested_spec, encode_batch(nested_spec, values8), 8)

    t = median_seconds(nested_batch, inner=200)
    print(f"nested Dict (8 leaves), 8 lanes, encode+decode: {t * 1e6:.2f} us")


if __name__ == "__main__":
    main()
