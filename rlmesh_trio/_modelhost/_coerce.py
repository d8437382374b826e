"""Anything we accept as a policy, made a :class:`~._policy.Policy`.

Apart from ``_policy`` because it knows the framework wrappers, which are built
on ``Policy`` themselves.
"""

from __future__ import annotations

import sys
from typing import Any

from ._policy import Policy
from ._torch import TorchPolicy

__all__ = ["as_policy"]


def as_policy(obj: Any) -> Policy:
    """Normalise anything we accept as a policy.

    A :class:`Policy` is returned as is; a torch ``nn.Module`` becomes a
    default ``TorchPolicy``; an object with a callable ``for_spaces`` (the
    framework policies) contributes that; an object with a callable
    ``predict`` attribute contributes ``predict`` and, if present,
    ``predict_batch`` and ``predict_chunk``; any other callable is a
    per-observation ``predict``.
    """
    if isinstance(obj, Policy):
        return obj
    # Only a process that imported torch can hold a module: never import it here.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.nn.Module):
        obj = TorchPolicy(obj)
    for_spaces = getattr(obj, "for_spaces", None)
    if callable(for_spaces):
        return Policy(for_spaces=for_spaces)
    predict = getattr(obj, "predict", None)
    if callable(predict):
        batch = getattr(obj, "predict_batch", None)
        chunk = getattr(obj, "predict_chunk", None)
        return Policy(
            predict=predict,
            predict_batch=batch if callable(batch) else None,
            predict_chunk=chunk if callable(chunk) else None,
        )
    if callable(obj):
        return Policy(predict=obj)
    raise TypeError(
        f"cannot serve {type(obj).__name__!r} as a policy: pass a callable predict(obs), "
        "an object with predict(obs) (and optionally predict_batch(obs_batch)), "
        "or rlmesh_trio.policy(...)"
    )
