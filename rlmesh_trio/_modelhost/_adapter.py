"""What ResolveAdapter recorded for one ``env_id``: specs, horizon and the policy to call."""

from __future__ import annotations

import attrs

from .._wire import core_pb, spaces_pb
from ._faults import ModelFault
from ._one_row import RowPlan
from ._policy import Policy

__all__ = ["Adapter", "observation_space"]


@attrs.frozen(slots=True)
class Adapter:
    """What ResolveAdapter recorded for one ``env_id``."""

    env_id: str
    env_spec: core_pb.EnvSpec
    observation_space: spaces_pb.SpaceSpec | None
    action_space: spaces_pb.SpaceSpec
    execution_horizon: int
    #: Groups whose adapters share this key (the observation spec's bytes) can be fused.
    fuse_key: bytes
    #: The policy this adapter calls: the host's, or what its ``for_spaces`` built for
    #: these specs (one object per distinct pair of specs, shared by their adapters).
    policy: Policy = attrs.field(eq=False, repr=False)
    #: The codec calls of one-row predicts, planned from the two specs (None: general path).
    row_plan: RowPlan | None = attrs.field(default=None, eq=False, repr=False)
    #: The action spec's bytes: fused groups with equal keys encode their actions as one slab.
    action_key: bytes = attrs.field(default=b"", eq=False, repr=False)


def observation_space(adapter: Adapter) -> spaces_pb.SpaceSpec:
    """The adapter's observation spec.

    Raises:
        ModelFault: the env spec had none (0.1.0's message).
    """
    if adapter.observation_space is None:
        raise ModelFault.internal(
            "internal error: model error: env EnvSpec has no observation_space"
        )
    return adapter.observation_space
