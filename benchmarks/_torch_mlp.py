"""A torch MLP policy for CartPole: 4 -> 256 -> 256 -> 2, fixed seeded weights, one thread.

Its cost is mostly per call (issue 23: 49 us for one row, 104 us for 32 on
one thread), the case where grouping predicts must pay. ``POLICY`` is the
plain batch-policy form (``rt.policy(act, batched=act_batch)``): calls run
under ``torch.inference_mode()``, observations become tensors with
``torch.from_numpy`` (no copy for float32 rows), the action is the sign of the
logits' difference with the CartPole balancing rule as a bias (so episodes run
long). ``NET`` is the module itself, for ``rlmesh.torch.Model``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import rlmesh_trio as rt

HIDDEN = 256
_SEED = 20261202


def build_network() -> torch.nn.Module:
    """The 4-256-256-2 network with its fixed weights, in eval mode."""
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(_SEED)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, 2),
    )
    with torch.no_grad():
        for param in net.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return net.eval()


NET = build_network()


def act_tensor(rows: torch.Tensor) -> torch.Tensor:
    """``(R, 4)`` float32 rows -> ``(R,)`` int64 actions: one forward for the rows."""
    with torch.inference_mode():
        logits = NET(rows)
        # The balancing rule as a bias on the logits keeps CartPole up for hundreds of steps.
        lean = rows[:, 2] + 0.5 * rows[:, 3]
        return (logits[:, 1] - logits[:, 0] + 40.0 * lean > 0.0).to(torch.int64)


def act_batch(obs: Any) -> np.ndarray:
    """``(R, 4)`` observations -> ``(R,)`` int64 actions (numpy in and out)."""
    rows = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))
    return act_tensor(rows).numpy()


def act(obs: Any) -> int:
    """One observation -> one action (the same network, one row)."""
    return int(act_batch(np.asarray(obs, dtype=np.float32).reshape(1, -1))[0])


POLICY = rt.policy(act, batched=act_batch)
