"""``SB3Policy``: a Stable-Baselines3 model (or a saved ``.zip``) as a policy.

The only module that imports stable_baselines3, and only when an
``SB3Policy`` is built (the ``sb3`` extra). Batching and error naming are
shared with the other frameworks in :mod:`._frameworks`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._errors import InvalidSpec
from .._extras import require
from ._frameworks import FrameworkPolicy

__all__ = ["SB3Policy"]


def _import_sb3() -> Any:
    return require("stable_baselines3", extra="sb3", purpose="SB3Policy")


def _load(sb3: Any, path: str, algorithm: Any, device: str) -> Any:
    """``algorithm.load(path)``; ``algorithm`` is a class or a name (``"PPO"``)."""
    if algorithm is None:
        raise InvalidSpec(f"SB3Policy({path!r}) needs algorithm=, e.g. algorithm='PPO'")
    cls = getattr(sb3, algorithm, None) if isinstance(algorithm, str) else algorithm
    if cls is None or not hasattr(cls, "load"):
        raise InvalidSpec(
            f"SB3Policy: algorithm {algorithm!r} is not a Stable-Baselines3 algorithm "
            "(PPO, A2C, DQN, SAC, TD3, DDPG, or a class with load())"
        )
    if not os.path.exists(path) and not os.path.exists(f"{path}.zip"):
        raise InvalidSpec(f"SB3Policy: no saved model at {path!r}")
    return cls.load(path, device=device)


class SB3Policy(FrameworkPolicy):
    """Evaluate a Stable-Baselines3 model with ``model.predict`` on whole batches.

    ``model`` is a trained model (``PPO``, ``DQN``, ...) or the path of one
    saved with ``model.save`` (then ``algorithm=`` names its class or the
    class itself; ``device`` is where it loads, default ``"auto"``). Each
    call passes the observations of one or more routes stacked along a
    leading axis to ``model.predict(obs, deterministic=deterministic)``, so
    grouped predicts are ONE call. The model's actions are used as they come
    (SB3 already unscales and clips Box actions), cast to the space's dtype.

    Raises:
        MissingExtra: stable-baselines3 is not installed.
        InvalidSpec: a path without ``algorithm``, an unknown algorithm, a
            missing file, or a model without ``predict``.
    """

    def __init__(
        self,
        model: Any,
        *,
        algorithm: Any = None,
        deterministic: bool = True,
        device: str = "auto",
    ) -> None:
        sb3 = _import_sb3()
        if isinstance(model, str | os.PathLike):
            model = _load(sb3, os.fspath(model), algorithm, device)
        if not callable(getattr(model, "predict", None)):
            raise InvalidSpec(f"SB3Policy needs a model with predict(), got {type(model).__name__}")
        self.model = model
        self.deterministic = bool(deterministic)
        self.name = f"SB3Policy({type(model).__name__})"
        self.action = "identity"

    def forward(self, obs_batch: Any) -> Any:
        """``model.predict`` over the batch (recurrent state is not carried)."""
        actions, _state = self.model.predict(obs_batch, deterministic=self.deterministic)
        return actions

    def to_numpy(self, output: Any) -> Any:
        """SB3 answers with numpy already."""
        return np.asarray(output)
