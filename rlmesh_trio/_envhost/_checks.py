"""Action checks, phrased the way 0.1.0 env servers phrase them (§3.3).

The codec (``rlmesh_trio.spaces``) decides whether an action slab is well
formed; this module only turns its ``ProtocolError`` into the INVALID_ACTION
message text a 0.1.0 client would see, and adds the one check the codec
leaves to the env side: NaN elements in float Box actions.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np

from .._errors import ProtocolError

__all__ = ["action_error_text", "find_nan"]

_LEAF_COUNT = re.compile(r"^leaf count mismatch: got (\d+) leaves, expected (\d+)$")
_LANE_PREFIX = re.compile(r"^lane \d+: ")


def action_error_text(err: ProtocolError) -> str:
    """The INVALID_ACTION message for a malformed action payload."""
    detail = err.detail
    counted = _LEAF_COUNT.match(detail)
    if counted:
        return f"length mismatch: got {counted[1]} leaf slabs, spec expects {counted[2]}"
    if detail.startswith("length mismatch"):
        # 0.1.0 reports slab-size faults without a leaf path.
        return detail
    detail = _LANE_PREFIX.sub("", detail)
    return f"{err.path}: {detail}" if err.path else detail


def find_nan(
    space: gym.Space[Any], value: Any, path: str = "$", *, lanes: int | None = None
) -> str | None:
    """Return the 0.1.0 message for the first NaN in a float Box leaf of ``value``, else None.

    ``value`` is one lane's action, or (``lanes=N``) N lanes stacked on a leading axis;
    the element index is always counted within one lane.
    """
    if isinstance(space, gym.spaces.Box):
        if space.dtype is None or not np.issubdtype(space.dtype, np.floating):
            return None
        arr = np.asarray(value).reshape(lanes or 1, -1)
        hits = np.argwhere(np.isnan(arr))
        if hits.size:
            return f"{path}: Box value at element {int(hits[0][1])} is NaN"
        return None
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            found = find_nan(sub, value[key], f"{path}.{key}", lanes=lanes)
            if found:
                return found
        return None
    if isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            found = find_nan(sub, value[i], f"{path}[{i}]", lanes=lanes)
            if found:
                return found
    return None
