"""Reading a run back from a file: its JSON report or its ledger, as a RunReport.

:func:`load_run` is the one entry point the ``report`` and ``compare``
commands read their input through, so each input kind is dispatched here
without touching the commands.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._errors import InvalidSpec
from ..orchestrator import RunReport, load_ledger
from ..orchestrator._ledger import LEDGER_SCHEMA
from ..report import report_from_dict

__all__ = ["load_run"]


def load_run(path: str | Path) -> RunReport:
    """Read a run back into a :class:`RunReport`: its JSON report (``--json`` output) or its
    ledger (``--ledger``, JSON Lines; rebuilt by :func:`~rlmesh_trio.load_ledger`).

    Raises:
        InvalidSpec: the file is missing, is not JSON, or is neither a report nor a ledger.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidSpec(f"{path}: cannot read ({exc.strerror or exc})") from None
    if _is_ledger(text):
        return load_ledger(path)
    return report_from_dict(text, str(path))


def _is_ledger(text: str) -> bool:
    """Whether ``text`` starts with a ledger header line."""
    try:
        header = json.loads(text.split("\n", 1)[0])
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("schema") == LEDGER_SCHEMA
