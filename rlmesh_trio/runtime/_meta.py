"""The little the driver needs from a completion's ``final_info``: the success flag."""

from __future__ import annotations

from .._wire import spaces_pb

__all__ = ["SUCCESS_KEYS", "episode_success"]

#: Keys read for success, first present wins (as the 0.1.0 native loop does).
SUCCESS_KEYS = ("is_success", "success", "task_success")


def episode_success(final_info: spaces_pb.MetaMap | None) -> bool | None:
    """Success from ``final_info``: a bool as is, a number when non-zero, else ``None``.

    Reads the ``MetaValue`` fields directly: only scalars matter here, so the
    full MetaMap conversion of ``rlmesh_trio.spaces`` is not needed.
    """
    if final_info is None:
        return None
    entries = final_info.entries
    for key in SUCCESS_KEYS:
        value = entries.get(key)
        if value is None:
            continue
        if value.bool is not None:
            return bool(value.bool)
        if value.integer is not None:
            return value.integer != 0
        if value.number is not None:
            return value.number != 0.0
        return None
    return None
