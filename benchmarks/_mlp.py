"""A small numpy MLP policy for CartPole: 4 -> 256 -> 256 -> 2, fixed seeded weights.

Its batched call is one matmul per layer, so a model server that fuses a
group of predicts into one ``predict_batch`` does one call where N single
predicts do N: the case where batching should pay. Both sides of the
benchmark serve this same class (rlmesh 0.1.0's ``rlmesh.numpy.Model``
server, started from ``_servers.py``), so only the client differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

HIDDEN = 256


def _weights() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(20261201)
    w1 = rng.standard_normal((4, HIDDEN)) / 2.0
    w2 = rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)
    w3 = rng.standard_normal((HIDDEN, 2)) / np.sqrt(HIDDEN)
    return w1, w2, w3


W1, W2, W3 = _weights()


def act_batch(obs: Any) -> np.ndarray:
    """``(R, 4)`` observations -> ``(R,)`` int64 actions: one matmul per layer."""
    x = np.asarray(obs, dtype=np.float64)
    h = np.tanh(x @ W1)
    h = np.tanh(h @ W2)
    logits = h @ W3
    rule = x[:, 2] + 0.5 * x[:, 3]  # the balancing rule breaks near-ties toward upright
    return (logits[:, 1] - logits[:, 0] + 4.0 * rule > 0.0).astype(np.int64)


def act(obs: Any) -> int:
    """One observation -> one action (the same network, one row)."""
    return int(act_batch(np.asarray(obs, dtype=np.float64).reshape(1, -1))[0])
