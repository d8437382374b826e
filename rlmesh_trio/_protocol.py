"""Wire-v1 constants and short aliases for the generated protobuf modules.

Everything else in the package imports message classes from here, so the
generated tree (``_proto``) is named in exactly one place.
"""

from __future__ import annotations

from ._proto.rlmesh.core import v1 as core_pb
from ._proto.rlmesh.env import v1 as env_pb
from ._proto.rlmesh.model import v1 as model_pb
from ._proto.rlmesh.spaces import v1 as spaces_pb

__all__ = [
    "CAP_CONCURRENT_PREDICT",
    "CAP_MULTI_LANE_SUBSET",
    "CAP_OBSERVATION_HISTORY",
    "CAP_SUBSET_STEP",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_GENERATION",
    "WORKFLOW_EDITION",
    "core_pb",
    "env_pb",
    "model_pb",
    "spaces_pb",
]

PROTOCOL_GENERATION = "rlmesh-wire-v1"
WORKFLOW_EDITION = "2026.06"
CAP_SUBSET_STEP = "subset_step"
#: Ours, beside ``subset_step``: one StepRequest/ResetRequest may name several lanes in
#: ``env_indices`` (answered in that order). 0.1.0 peers neither send nor read it.
CAP_MULTI_LANE_SUBSET = "rlmesh_trio.env.multi_lane_subset.v1"
CAP_CONCURRENT_PREDICT = "rlmesh.model.concurrent_predict.v1"
CAP_OBSERVATION_HISTORY = "rlmesh.model.observation_history.v1"
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
