"""The policy under test: replace this module with your own.

A hand-written CartPole-v1 controller: push the cart toward the side the
pole is falling to, looking a little ahead with the pole's angular velocity.
Anything ``rlmesh_trio`` can serve works the same way: a callable
``obs -> action``, an object with ``predict``/``predict_batch``, or
``rlmesh_trio.policy(fn, batched=fn_batch)``.
"""

from __future__ import annotations

import numpy as np

LOOKAHEAD = 0.5


def act(obs: np.ndarray) -> int:
    """One observation ``[x, x_dot, theta, theta_dot]`` -> 0 (push left) or 1 (push right)."""
    return 1 if obs[2] + LOOKAHEAD * obs[3] > 0 else 0
