"""The EnvContract an env endpoint advertises (protocol notes §3.0, §3.7).

| served object            | num_envs | autoreset               | capabilities      |
|--------------------------|----------|-------------------------|-------------------|
| one gymnasium Env        | 1        | DISABLED                | subset_step       |
| a list of N Envs (lanes) | N        | DISABLED                | subset_step       |
| a VectorEnv, N >= 2      | N        | NEXT_STEP or DISABLED   | none              |
| a VectorEnv, N == 1      | 1        | DISABLED (batch dropped)| subset_step       |
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import gymnasium as gym

from .. import spaces
from .._protocol import core_pb, spaces_pb

__all__ = ["UNKNOWN_ENV_ID", "build_contract", "env_id_of", "metadata_map", "space_spec"]

UNKNOWN_ENV_ID = "UnknownEnv-v1"

#: Distinct Box/Discrete spaces whose spec is kept (see :func:`space_spec`).
_KEPT_SPECS = 64
_SPECS: dict[Hashable, spaces_pb.SpaceSpec] = {}


def _exact_key(space: gym.Space[Any]) -> Hashable | None:
    """A hashable key equal exactly for equal Box or Discrete spaces (None for others)."""
    if type(space) is gym.spaces.Box:
        low, high = space.low, space.high
        return ("box", space.shape, low.dtype.str, low.tobytes(), high.tobytes())
    if type(space) is gym.spaces.Discrete:
        return ("discrete", int(space.n), int(space.start), space.dtype.str)
    return None


def space_spec(space: gym.Space[Any]) -> spaces_pb.SpaceSpec:
    """``spaces.from_gymnasium(space)``, one spec object for exactly equal Box and Discrete
    spaces: the contracts of many envs of one kind (32 CartPoles, one route each) share
    their spec objects, so what is cached per spec object (its codec, its bytes) is
    computed once. Contract specs are never modified (specs are treated as immutable once
    used, see ``spaces._compile``).

    Raises:
        ProtocolError: a space with no wire form (as ``from_gymnasium``).
    """
    key = _exact_key(space)
    if key is None:
        return spaces.from_gymnasium(space)
    spec = _SPECS.get(key)
    if spec is None:
        spec = spaces.from_gymnasium(space)
        if len(_SPECS) >= _KEPT_SPECS:
            del _SPECS[next(iter(_SPECS))]
        _SPECS[key] = spec
    return spec


def env_id_of(env: Any) -> str:
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", None)
    return env_id if isinstance(env_id, str) and env_id else UNKNOWN_ENV_ID


def metadata_map(metadata: Mapping[str, Any] | None) -> spaces_pb.MetaMap:
    """``env.metadata`` as a MetaMap.

    Entries with no wire form (a callable, an object) are left out rather than
    refusing to serve the env: metadata is advisory.
    """
    entries: dict[str, spaces_pb.MetaValue] = {}
    for key, value in (metadata or {}).items():
        if not isinstance(key, str):
            continue
        try:
            converted = spaces.meta_from_python({key: value})
        except TypeError:
            continue
        assert isinstance(converted, spaces_pb.MetaMap)
        entries.update(converted.entries)
    return spaces_pb.MetaMap(entries=entries)


def build_contract(
    *,
    env_id: str,
    action_space: gym.Space[Any],
    observation_space: gym.Space[Any],
    metadata: Mapping[str, Any] | None,
    num_envs: int,
    render_mode: str | None,
    autoreset: core_pb.AutoresetMode,
) -> core_pb.EnvContract:
    return core_pb.EnvContract(
        spec=core_pb.EnvSpec(
            id=env_id,
            action_space=space_spec(action_space),
            observation_space=space_spec(observation_space),
            metadata=metadata_map(metadata),
        ),
        num_envs=num_envs,
        render_mode=render_mode or "",
        autoreset_mode=autoreset,
    )
