"""A built-in deterministic CartPole policy, for demos, tests and benchmarks.

It pushes the cart toward the side the pole is falling to, looking a little
ahead with the angular velocity: ``1 if theta + 0.5 * theta_dot > 0 else 0``.
That simple rule keeps CartPole-v1 up for hundreds of steps from most seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._modelhost import Policy, policy

__all__ = ["CARTPOLE_POLICY", "cartpole_policy", "cartpole_policy_batch"]

#: How far ahead (in seconds of angular velocity) the rule looks.
LOOKAHEAD = 0.5


def cartpole_policy(obs: Any) -> int:
    """One CartPole observation ``[x, x_dot, theta, theta_dot]`` -> action 0 (left) or 1 (right)."""
    return 1 if float(obs[2]) + LOOKAHEAD * float(obs[3]) > 0.0 else 0


def cartpole_policy_batch(obs_batch: Any) -> np.ndarray:
    """The same rule over a ``(R, 4)`` batch -> ``(R,)`` int64 actions."""
    obs = np.asarray(obs_batch)
    return (obs[:, 2] + LOOKAHEAD * obs[:, 3] > 0.0).astype(np.int64)


#: Both forms together: model servers fuse grouped predicts into one batched call.
CARTPOLE_POLICY: Policy = policy(cartpole_policy, batched=cartpole_policy_batch)
