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
from gymnasium.spaces.text import alphanumeric

from .._errors import ProtocolError

__all__ = ["CONFORMANCE_KEY", "action_error_text", "conformance_issues", "find_nan"]

_DEFAULT_CHARSET = frozenset(alphanumeric)
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
        for key in sorted(space.spaces, key=lambda k: k.encode()):  # wire (bytewise) order
            found = find_nan(space.spaces[key], value[key], f"{path}.{key}", lanes=lanes)
            if found:
                return found
        return None
    if isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            found = find_nan(sub, value[i], f"{path}[{i}]", lanes=lanes)
            if found:
                return found
    return None


#: Info key under which out-of-bounds values are reported (§3.7).
CONFORMANCE_KEY = "rlmesh.conformance.warning"


def conformance_issues(space: gym.Space[Any], value: Any, path: str = "$") -> list[tuple[str, str]]:
    """The first value that decodes fine but breaks the space's bounds: ``[(path, detail)]``.

    0.1.0 delivers such values and warns (validation policy ``warn``): a Box
    element outside ``[low, high]``, a Text outside its length bounds or charset.
    """
    if isinstance(space, gym.spaces.Box):
        arr = np.asarray(value)
        if arr.shape == space.shape:
            # The common case, every step: in bounds. NaN compares False, so it passes
            # here as it does below. No errstate block here (it costs more than the two
            # compares): numpy's ordered comparisons are quiet on NaN.
            if not ((arr > space.high).any() or (arr < space.low).any()):
                return []
        arr = arr.reshape(-1)
        low = np.broadcast_to(space.low, space.shape).reshape(-1)
        high = np.broadcast_to(space.high, space.shape).reshape(-1)
        with np.errstate(invalid="ignore"):
            above = np.flatnonzero(arr > high)
            below = np.flatnonzero(arr < low)
        if above.size or below.size:
            first_above = int(above[0]) if above.size else arr.size
            first_below = int(below[0]) if below.size else arr.size
            element = min(first_above, first_below)
            side = "above high bound" if element == first_above else "below low bound"
            return [(path, f"{path}: Box value at element {element} out of bounds: {side}")]
        return []
    if isinstance(space, gym.spaces.Text):
        text = str(value)
        if len(text) > space.max_length:
            return [(path, f"{path}: text length {len(text)} exceeds maximum {space.max_length}")]
        if len(text) < space.min_length:
            return [(path, f"{path}: text length {len(text)} below minimum {space.min_length}")]
        charset = space.character_set
        if charset == _DEFAULT_CHARSET:
            return []  # gymnasium's default goes on the wire as "any character"
        for char in text:
            if char not in charset:
                return [(path, f"{path}: character {char!r} not in charset")]
        return []
    # Like 0.1.0, a value reports its first problem only (leaves in wire order).
    if isinstance(space, gym.spaces.Dict):
        for key in sorted(space.spaces, key=lambda k: k.encode()):
            found = conformance_issues(space.spaces[key], value[key], f"{path}.{key}")
            if found:
                return found
        return []
    if isinstance(space, gym.spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            found = conformance_issues(sub, value[i], f"{path}[{i}]")
            if found:
                return found
    return []
