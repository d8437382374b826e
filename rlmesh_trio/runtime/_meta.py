"""What the driver reads from metadata: a completion's success flag, declared reset options."""

from __future__ import annotations

from .._protocol import spaces_pb

__all__ = [
    "RESET_OPTIONS_KEY",
    "SUCCESS_KEYS",
    "TRIAL_INDEX_OPTION",
    "declares_reset_option",
    "episode_success",
]

#: Keys read for success, first present wins (as the 0.1.0 native loop does).
SUCCESS_KEYS = ("is_success", "success", "task_success")
#: Env metadata key listing the reserved reset options an env accepts.
RESET_OPTIONS_KEY = "rlmesh.env.v1.reset_options"
#: The reserved reset option carrying an episode's trial ordinal.
TRIAL_INDEX_OPTION = "trial_index"


def declares_reset_option(metadata: spaces_pb.MetaMap | None, key: str) -> bool:
    """Whether env metadata lists ``key`` under :data:`RESET_OPTIONS_KEY` (a text or a list).

    A reserved option goes only to an env that asked for it, so an env that
    passes ``options`` on to a third-party ``reset`` never sees a key it
    cannot interpret (rlmesh 0.1.0's rule).
    """
    if metadata is None:
        return False
    declared = metadata.entries.get(RESET_OPTIONS_KEY)
    if declared is None:
        return False
    if declared.text is not None:
        return declared.text == key
    if declared.list is not None:
        return any(item.text == key for item in declared.list.items)
    return False


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
