"""The EnvContract an env endpoint advertises (protocol notes §3.0, §3.7).

| served object            | num_envs | autoreset               | capabilities      |
|--------------------------|----------|-------------------------|-------------------|
| one gymnasium Env        | 1        | DISABLED                | subset_step       |
| a list of N Envs (lanes) | N        | DISABLED                | subset_step       |
| a VectorEnv, N >= 2      | N        | NEXT_STEP or DISABLED   | none              |
| a VectorEnv, N == 1      | 1        | DISABLED (batch dropped)| subset_step       |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from .. import spaces
from .._protocol import core_pb, spaces_pb

__all__ = ["UNKNOWN_ENV_ID", "build_contract", "env_id_of", "metadata_map"]

UNKNOWN_ENV_ID = "UnknownEnv-v1"


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
            action_space=spaces.from_gymnasium(action_space),
            observation_space=spaces.from_gymnasium(observation_space),
            metadata=metadata_map(metadata),
        ),
        num_envs=num_envs,
        render_mode=render_mode or "",
        autoreset_mode=autoreset,
    )
