"""Issue 33 shape A: 32 CartPole routes sharing one torch MLP, default settings, vs a hand loop.

The workload: 32 ``CartPole-v1`` env objects, the 4-256-256-2 torch MLP of
``_torch_mlp.py`` (one thread, argmax of its logits), ``rt.shard(envs=...,
model=module, seeds=...)`` then ``rt.run(routes)`` with default settings
(the fused block), against the hand-written loop: ``gym.make_vec(...,
32, "sync")`` and one forward per step. Each runs ``--rounds`` rounds
(``rounds * 32`` lane steps); the runs are interleaved, best of ``--repeat``.
Reported: steps/s (wall) and CPU per 32-lane round (``time.process_time``),
which is what counts on a loaded machine.

    python benchmarks/fused_routes.py [--rounds 3000] [--repeat 2] [--no-fuse]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import rlmesh_trio as rt

try:
    from _torch_mlp import build_network
except ImportError:  # run as a module from the repository root
    from benchmarks._torch_mlp import build_network

LANES = 32


def hand_loop(net: torch.nn.Module, rounds: int) -> tuple[int, float, float]:
    """The hand-written loop: (lane steps, wall s, cpu s)."""
    envs = gym.make_vec("CartPole-v1", LANES, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        with torch.inference_mode():
            actions = net(torch.from_numpy(obs.astype(np.float32))).argmax(-1).numpy()
        obs, _, _, _, _ = envs.step(actions)
    return rounds * LANES, time.perf_counter() - wall, time.process_time() - cpu


def shape_a(net: torch.nn.Module, rounds: int, batch_predicts: bool | None) -> tuple[Any, ...]:
    """32 routes via rt.shard sharing ``net``: (lane steps, wall s, cpu s).

    Enough seeds for about ``rounds`` rounds (the MLP's episodes run ~9 steps:
    ``rounds * 32 / 9`` episodes, dealt over the routes).
    """
    envs = [gym.make("CartPole-v1") for _ in range(LANES)]
    routes = rt.shard(envs, net, seeds=range(rounds * LANES // 9))
    wall, cpu = time.perf_counter(), time.process_time()
    report = rt.run(routes, batch_predicts=batch_predicts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert report.ok
    return report.total_steps, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-fuse", action="store_true", help="also batch_predicts=False")
    args = parser.parse_args()
    net = build_network()  # one torch thread
    cases: dict[str, Any] = {
        "hand loop (make_vec sync)": lambda: hand_loop(net, args.rounds),
        "shape A (32 routes, default)": lambda: shape_a(net, args.rounds, None),
    }
    if args.no_fuse:
        cases["shape A (batch_predicts=False)"] = lambda: shape_a(net, args.rounds // 4, False)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(args.repeat):
        for name, case in cases.items():
            steps, wall, cpu = case()
            rate, cpu_round = steps / wall, cpu / (steps / LANES) * 1e6
            old = best.get(name, (0.0, float("inf")))
            best[name] = (max(rate, old[0]), min(cpu_round, old[1]))  # best of each
    hand_rate, hand_cpu = best["hand loop (make_vec sync)"]
    for name, (rate, cpu_round) in best.items():
        print(
            f"{name:34s} {rate:9.0f} steps/s  {cpu_round:7.0f} us CPU/round  "
            f"x{rate / hand_rate:.2f} wall, x{hand_cpu / cpu_round:.2f} CPU"
        )


if __name__ == "__main__":
    main()
