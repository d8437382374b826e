"""Hooks: log a run, perturb a policy's actions, and count progress, all in one chain.

Three hooks watch the same two CartPole routes, combined with
``rt.HookChain``:

* ``rt.hooks.LoggingHooks`` -- writes session starts/ends and every finished
  episode to :mod:`logging`;
* ``FlipActions`` -- a *transform* hook: on the routes it targets, it decodes
  each action slab with ``rlmesh_trio.spaces.decode_batch``, flips a seeded
  random share of the actions, and encodes the result back; a quick
  robustness check of a policy against actuation noise;
* ``StepCounter`` -- a progress hook that counts steps per route and prints a
  line every ``every`` steps.

Env and policy run in-process (no servers, no network)::

    python examples/custom_hooks.py
    python examples/custom_hooks.py --episodes 2 --flip 0.3 --max-steps 200
"""

from __future__ import annotations

import argparse
import logging
import random
from collections import Counter
from typing import Any

import gymnasium
import numpy as np
import trio

import rlmesh_trio as rt
from rlmesh_trio import spaces
from rlmesh_trio.hooks import events


def policy(obs: np.ndarray) -> int:
    """Push the cart toward the side the pole is falling to."""
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


class FlipActions(rt.RuntimeHooks):
    """Flip each action of the targeted routes with probability ``p`` (Discrete(2) actions)."""

    def __init__(self, p: float, routes: set[str], seed: int = 0) -> None:
        self.p = p
        self.routes = routes
        self.rng = random.Random(seed)
        self.flipped: Counter[str] = Counter()

    async def transform_action(self, event: events.ActionReceivedEvent) -> Any:
        if event.route_id not in self.routes or event.action is None or not event.action_space:
            return None  # None: send the action unchanged
        # One slab covers every lane of the step, one row per entry of env_indices.
        actions = spaces.decode_batch(event.action_space, event.action, len(event.env_indices))
        changed = False
        for i, action in enumerate(actions):
            if self.rng.random() < self.p:
                actions[i] = 1 - int(action)
                self.flipped[event.route_id] += 1
                changed = True
        return spaces.encode_batch(event.action_space, actions) if changed else None


class StepCounter(rt.RuntimeHooks):
    """Count steps per route; print a progress line every ``every`` steps of a route."""

    def __init__(self, every: int = 100) -> None:
        self.every = every
        self.steps: Counter[str] = Counter()

    async def step_completed(self, event: events.StepCompletedEvent) -> None:
        self.steps[event.route_id] += 1
        if self.steps[event.route_id] % self.every == 0:
            print(f"progress: {event.route_id} at {self.steps[event.route_id]} steps")


async def main(episodes: int, flip: float, max_steps: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    # The runtime also logs its own lines, which LoggingHooks relays per route: keep one copy.
    logging.getLogger("rlmesh_trio.runtime").setLevel(logging.WARNING)

    def make_env() -> gymnasium.Env:
        return gymnasium.make("CartPole-v1")

    seeds = range(100, 100 + episodes)  # both routes play the same seeds
    routes = [
        rt.Route(make_env, policy, seeds=seeds, route_id="clean", max_episode_steps=max_steps),
        rt.Route(make_env, policy, seeds=seeds, route_id="noisy", max_episode_steps=max_steps),
    ]
    flipper = FlipActions(flip, routes={"noisy"})
    counter = StepCounter(every=100)
    hooks = rt.HookChain([rt.hooks.LoggingHooks(), flipper, counter])
    report = await rt.run_routes(routes, hooks=hooks)

    for outcome in report:
        mean = sum(ep.reward for ep in outcome.episodes) / outcome.total_episodes
        print(
            f"{outcome.route_id}: {outcome.total_episodes} episodes, mean reward {mean:.1f}, "
            f"{counter.steps[outcome.route_id]} steps counted, "
            f"{flipper.flipped[outcome.route_id]} actions flipped"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3, help="episodes per route")
    parser.add_argument("--flip", type=float, default=0.25, help="share of actions flipped")
    parser.add_argument("--max-steps", type=int, default=500, help="truncate episodes")
    args = parser.parse_args()
    trio.run(main, args.episodes, args.flip, args.max_steps)
