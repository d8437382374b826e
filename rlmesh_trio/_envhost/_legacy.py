"""Envs rlmesh 0.1.0 serves that are not quite gymnasium: the legacy gym API and
duck-typed vector envs.

rlmesh normalises both at its server boundary, and so do we:

* ``reset()`` may return the bare observation (no info): info is ``{}``. A
  2-tuple whose second item is a mapping is ``(obs, info)``, except for a
  2-entry Tuple observation space whose first item is not itself a pair
  (rlmesh's rule for telling a bare ``Tuple(x, Dict)`` observation apart).
* ``reset()`` that takes no ``seed`` / ``options`` keyword gets only what it
  takes; a seed then goes to the legacy ``env.seed(seed)`` if the env has one.
* ``step()`` may return the legacy 4-tuple ``(obs, reward, done, info)``:
  ``truncated`` is ``info["TimeLimit.truncated"]`` (False when absent) and
  ``terminated`` is ``done and not truncated``; for a vector env per lane,
  from a dict of arrays or a list of per-lane dicts.
* A vector env is anything with ``num_envs`` and ``single_observation_space``
  / ``single_action_space``; batch spaces it lacks are built from the single
  ones (:class:`DuckVector`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space

__all__ = ["DuckVector", "is_vector_like", "normalize_reset", "normalize_step", "reset_env"]

_TIME_LIMIT = "TimeLimit.truncated"

# reset() keywords a callable accepts, by the underlying function (computed once each).
_RESET_KWARGS: dict[Any, tuple[bool, bool]] = {}


def is_vector_like(env: Any) -> bool:
    """rlmesh's test: a vector env exposes ``num_envs`` or per-lane ``single_*`` spaces."""
    if isinstance(env, gym.vector.VectorEnv):
        return True
    return not isinstance(env, gym.Env) and (
        hasattr(env, "num_envs")
        or hasattr(env, "single_observation_space")
        or hasattr(env, "single_action_space")
    )


def _reset_kwargs(reset: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether ``reset`` accepts ``seed`` and ``options`` (a ``**kwargs`` accepts both)."""
    key = getattr(reset, "__func__", reset)
    known = _RESET_KWARGS.get(key)
    if known is not None:
        return known
    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: assume gymnasium's
        known = (True, True)
    else:
        names = {p.name for p in params}
        anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        known = (anything or "seed" in names, anything or "options" in names)
    _RESET_KWARGS[key] = known
    return known


def reset_env(env: Any, seed: Any, options: dict[str, Any] | None) -> Any:
    """Call ``env.reset`` with the keywords it takes (see the module doc); the raw result."""
    reset = env.reset
    takes_seed, takes_options = _reset_kwargs(reset)
    if takes_seed and takes_options:
        return reset(seed=seed, options=options)
    kwargs: dict[str, Any] = {}
    if takes_seed:
        kwargs["seed"] = seed
    elif seed is not None and callable(getattr(env, "seed", None)):
        env.seed(seed)  # the legacy gym way of seeding
    if takes_options and options is not None:
        kwargs["options"] = options
    return reset(**kwargs)


def normalize_reset(result: Any, observation_space: Any) -> tuple[Any, Any]:
    """``(obs, info)`` from a gymnasium or a legacy (bare observation) reset."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping):
        subspaces = getattr(observation_space, "spaces", None)
        head = result[0]
        head_is_pair = isinstance(head, tuple) and len(head) == 2
        if not (isinstance(subspaces, tuple | list) and len(subspaces) == 2 and not head_is_pair):
            return result[0], result[1]
    return result, {}


def normalize_step(result: Any, lanes: int | None = None) -> tuple[Any, Any, Any, Any, Any]:
    """A 5-tuple from a gymnasium or a legacy 4-tuple step; ``lanes`` for a vector env.

    Raises ``ValueError`` for any other shape (the host reports it as the env's failure).
    """
    if len(result) == 5:
        return result  # type: ignore[no-any-return]
    if len(result) != 4:
        raise ValueError(
            f"env.step() must return 4 legacy gym values or 5 gymnasium values, got {len(result)}"
        )
    obs, reward, done, info = result
    if lanes is None:
        truncated = bool(info.get(_TIME_LIMIT, False)) if isinstance(info, Mapping) else False
        return obs, reward, bool(done) and not truncated, truncated, info
    dones = np.asarray(done, dtype=bool).reshape(-1)
    truncs = _lane_time_limits(info, lanes)
    info_dict = _info_dict(info, lanes)
    return obs, reward, dones & ~truncs, truncs & dones, info_dict


def _lane_time_limits(info: Any, lanes: int) -> np.ndarray:
    out = np.zeros(lanes, dtype=bool)
    if isinstance(info, Mapping) and _TIME_LIMIT in info:
        flags = np.asarray(info[_TIME_LIMIT], dtype=bool).reshape(-1)
        mask = np.asarray(info.get("_" + _TIME_LIMIT, np.ones(lanes, bool)), bool).reshape(-1)
        out[: len(flags)] = flags[:lanes] & mask[: len(flags)][:lanes]
    elif isinstance(info, list | tuple):
        for lane, item in enumerate(info[:lanes]):
            out[lane] = isinstance(item, Mapping) and bool(item.get(_TIME_LIMIT, False))
    return out


def _info_dict(info: Any, lanes: int) -> dict[str, Any]:
    """Old gym vector envs return a list of per-lane dicts: gymnasium's dict of arrays."""
    if isinstance(info, Mapping):
        return dict(info)
    if not isinstance(info, list | tuple):
        return {}
    merged: dict[str, Any] = {}
    keys = {key for item in info if isinstance(item, Mapping) for key in item}
    for key in sorted(keys, key=str):
        values = np.empty(lanes, dtype=object)
        mask = np.zeros(lanes, dtype=bool)
        for lane, item in enumerate(info[:lanes]):
            if isinstance(item, Mapping) and key in item:
                values[lane], mask[lane] = item[key], True
        merged[key], merged["_" + str(key)] = values, mask
    return merged


class DuckVector:
    """A vector env that is not a gymnasium ``VectorEnv``, seen as one by the vector host.

    Batch ``observation_space`` / ``action_space`` are the env's own when it has
    them, else batched from the single spaces; reset and step are normalised
    (see the module doc). Every other attribute is the env's.

    Raises ``TypeError`` when the env lacks ``num_envs`` or a single space.
    """

    def __init__(self, env: Any) -> None:
        missing = [
            name
            for name in ("num_envs", "single_observation_space", "single_action_space")
            if not hasattr(env, name)
        ]
        if missing:
            raise TypeError(
                f"a vector env needs {', '.join(missing)} (it has num_envs or single_*)"
            )
        self.env = env
        self.num_envs = int(env.num_envs)
        self.single_observation_space: gym.Space[Any] = env.single_observation_space
        self.single_action_space: gym.Space[Any] = env.single_action_space
        self.observation_space = getattr(env, "observation_space", None) or batch_space(
            self.single_observation_space, self.num_envs
        )
        self.action_space = getattr(env, "action_space", None) or batch_space(
            self.single_action_space, self.num_envs
        )
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.spec = getattr(env, "spec", None)
        self.render_mode = getattr(env, "render_mode", None)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        return normalize_reset(reset_env(self.env, seed, options), self.single_observation_space)

    def step(self, actions: Any) -> Any:
        return normalize_step(self.env.step(actions), self.num_envs)

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()
