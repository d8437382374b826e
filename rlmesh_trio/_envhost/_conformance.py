"""Conformance warnings: values that decode but break their space's bounds (§3.3, §3.7).

Under the default validation policy ``warn`` such actions and observations are
delivered, and the response's ``infos`` carry a list of
``{"path", "detail", "kind"}`` maps under ``rlmesh.conformance.warning``. Each
``(lane, kind, path)`` is reported once per served env. The policy comes from
``RLMESH_VALIDATION_POLICY`` (``warn``, ``strict``: refuse such actions as
INVALID_ACTION, ``off``: no checks), as for 0.1.0 env servers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from ._checks import CONFORMANCE_KEY, conformance_issues
from ._host import invalid_action

__all__ = ["Conformance", "with_warnings"]

_POLICIES = ("warn", "strict", "off")


class Conformance:
    """Per-endpoint bounds checks with once-only reporting."""

    def __init__(self, policy: str | None = None) -> None:
        chosen = (policy or os.environ.get("RLMESH_VALIDATION_POLICY") or "warn").strip().lower()
        self.policy = chosen if chosen in _POLICIES else "warn"
        self._seen: set[tuple[int, str, str]] = set()
        self._lock = threading.Lock()

    def check(
        self, lane: int, kind: str, space: gym.Space[Any], value: Any
    ) -> list[dict[str, str]]:
        """New warnings for one lane's value (INVALID_ACTION for an action if ``strict``)."""
        if self.policy == "off":
            return []
        issues = conformance_issues(space, value)
        if not issues:
            return []
        if self.policy == "strict" and kind == "action":
            raise invalid_action(issues[0][1])
        fresh: list[dict[str, str]] = []
        with self._lock:
            for path, detail in issues:
                key = (lane, kind, path)
                if key in self._seen:
                    continue
                self._seen.add(key)
                fresh.append({"path": path, "detail": detail, "kind": kind})
        return fresh


def with_warnings(info: Any, warnings: list[dict[str, str]]) -> Any:
    """``info`` plus the warnings under the reserved key (a copy; the env's dict is untouched)."""
    if not warnings:
        return info
    merged: dict[str, Any] = dict(info) if isinstance(info, Mapping) else {}
    merged[CONFORMANCE_KEY] = list(merged.get(CONFORMANCE_KEY, [])) + warnings
    return merged
