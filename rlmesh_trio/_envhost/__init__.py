"""The env host: rlmesh 0.1.0's env-server semantics, independent of any transport.

:func:`make_host` picks the flavour for what it is given (protocol notes
§3.0): a gymnasium ``Env`` or a list of them becomes a lane endpoint
(``subset_step``, DISABLED autoreset); a ``VectorEnv`` with two or more lanes
becomes a vector endpoint (NEXT_STEP or DISABLED); a one-lane ``VectorEnv`` is
served as a single lane. The gRPC :class:`~rlmesh_trio.EnvServer`
and the in-process :class:`~rlmesh_trio.LocalEnv` both drive an :class:`EnvHost`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ._contract import UNKNOWN_ENV_ID, build_contract
from ._episodes import INTERRUPTED_BUFFER, EpisodeBook
from ._host import SUPPORTED_EDITIONS, Call, EnvFailure, EnvHost, HostReply
from ._lanes import LaneHost
from ._legacy import DuckVector, is_vector_like
from ._schedule import Ticket
from ._single import SingleLane
from ._vector import VectorHost

__all__ = [
    "INTERRUPTED_BUFFER",
    "SUPPORTED_EDITIONS",
    "UNKNOWN_ENV_ID",
    "Call",
    "EnvFailure",
    "EnvHost",
    "EpisodeBook",
    "HostReply",
    "LaneHost",
    "Ticket",
    "VectorHost",
    "build_contract",
    "make_host",
]


def make_host(env: Any, *, close_env: bool = False) -> EnvHost:
    """Build the host for a gymnasium Env, a list of Envs (lanes), or a VectorEnv.

    As in rlmesh 0.1.0, a duck-typed vector env (``num_envs`` and
    ``single_observation_space`` / ``single_action_space``, maybe no batch
    spaces) is served as a vector env, and the legacy gym API (bare-observation
    resets, 4-tuple steps) is normalised (see ``_legacy``).
    ``close_env`` makes :meth:`EnvHost.close` close the env(s) too.
    Raises ``ValueError`` for an empty list or a SAME_STEP vector env, and
    ``TypeError`` for a vector-like env without its single spaces or for
    something that is no env at all (no ``reset``/``step``/spaces).
    """
    if is_vector_like(env) and not isinstance(env, gym.vector.VectorEnv):
        env = DuckVector(env)
    if isinstance(env, gym.vector.VectorEnv | DuckVector):
        if env.num_envs == 1:
            return LaneHost([SingleLane(env)], close_envs=close_env)
        return VectorHost(env, close_env=close_env)
    if isinstance(env, list | tuple):
        for i, lane in enumerate(env):
            _require_env(lane, f"env[{i}]")
        return LaneHost(list(env), close_envs=close_env)
    _require_env(env, "env")
    return LaneHost([env], close_envs=close_env)


#: What serving an env calls on it: without these it is no gymnasium env.
_ENV_PARTS = ("reset", "step", "observation_space", "action_space")


def _require_env(env: Any, where: str) -> None:
    missing = [part for part in _ENV_PARTS if not hasattr(env, part)]
    if missing:
        raise TypeError(
            f"{where} must be a gymnasium Env, a list of Envs or a VectorEnv, got "
            f"{type(env).__name__} (no {', '.join(missing)})"
        )
