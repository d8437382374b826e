"""Evaluate a CartPole policy over 8 parallel routes with the Python API.

Starts 8 CartPole-v1 env servers and one model server inside this process
(real gRPC on 127.0.0.1), deals seeds over one route per env server with
``rt.shard``, runs every route concurrently with ``rt.run_routes`` under live
progress bars, and prints a per-route summary.

Run it from anywhere::

    python examples/parallel_rollouts.py                        # 8 routes, 16 episodes
    python examples/parallel_rollouts.py --routes 4 --episodes 8 --max-steps 100

Swap the served env or policy for your own; point ``rt.shard`` at addresses of
env servers running elsewhere (ours or rlmesh's) to evaluate against them.
"""

from __future__ import annotations

import argparse
from contextlib import AsyncExitStack

import gymnasium
import numpy as np
import trio

import rlmesh_trio as rt


def act(obs: np.ndarray) -> int:
    """Push the cart toward the side the pole is falling to."""
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


def act_batch(obs: np.ndarray) -> np.ndarray:
    """The same rule over a batch of observations (one row per route asking at once)."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


# With a batched form, the model server answers concurrent routes in one call.
POLICY = rt.policy(act, batched=act_batch)


async def main(num_routes: int, episodes: int, max_steps: int | None = None) -> rt.RunReport:
    async with AsyncExitStack() as servers:
        model = await servers.enter_async_context(rt.serve_model(POLICY, "127.0.0.1:0"))
        env_addresses = []
        for _ in range(num_routes):
            env = await servers.enter_async_context(
                rt.serve_env(gymnasium.make("CartPole-v1"), "127.0.0.1:0")
            )
            env_addresses.append(env.address)

        # Seeds 0..episodes-1 dealt round-robin: route-0 gets 0, 8, 16, ...
        # max_episode_steps (optional) truncates long episodes on the runtime side.
        routes = rt.shard(
            env_addresses, model=model.address, seeds=range(episodes), max_episode_steps=max_steps
        )
        with rt.hooks.RichProgress(routes) as progress:
            report = await rt.run_routes(routes, hooks=progress)
        # Leaving the block stops every server (bounded, even on error or Ctrl+C).

    for outcome in report:
        rewards = [ep.reward for ep in outcome.episodes]
        print(
            f"{outcome.route_id}: {outcome.status}, {outcome.total_episodes} episodes, "
            f"{outcome.total_steps} steps, mean reward {np.mean(rewards):.1f} ({outcome.env})"
        )
    print(
        f"total: {len(report.routes)} routes, {report.total_episodes} episodes, "
        f"{report.total_steps} steps, mean reward {report.mean_reward:.1f}, "
        f"{report.steps_per_s:.0f} steps/s"
    )
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=8, help="env servers, one route each")
    parser.add_argument("--episodes", type=int, default=16, help="episodes over all routes")
    parser.add_argument("--max-steps", type=int, default=None, help="truncate episodes")
    args = parser.parse_args()
    trio.run(main, args.routes, args.episodes, args.max_steps)
