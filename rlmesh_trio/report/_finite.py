"""Keeping a report's JSON strict: NaN and infinities become ``null`` with a word on why.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which strict
readers (jq, browsers, most other languages) reject, so one NaN reward
would make a whole report unreadable to them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = ["nonfinite_note", "raw_float", "strict_json_value"]


def raw_float(value: float) -> str:
    """``"nan"``, ``"inf"`` or ``"-inf"``: a non-finite float as a JSON string."""
    return repr(float(value))


def nonfinite_note(values: Iterable[float], what: str) -> str | None:
    """``"nan, inf in episode rewards"``, or ``None`` when every value is finite."""
    kinds = sorted({raw_float(v) for v in values if not math.isfinite(v)})
    return f"{', '.join(kinds)} in {what}" if kinds else None


def strict_json_value(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: strict_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json_value(item) for item in value]
    return value
