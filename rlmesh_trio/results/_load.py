"""Reading a run back from a file: its JSON report or its ledger, as a RunReport.

:func:`load_run` is the one entry point the ``report`` and ``compare``
commands read their input through, so each input kind is dispatched here
without touching the commands.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._errors import RunFileError
from ..orchestrator._durable import load_ledger
from ..orchestrator._ledger import LEDGER_SCHEMA
from ..report import report_from_dict
from ..report._report import RunReport

__all__ = ["load_run"]


def load_run(path: str | Path) -> RunReport:
    """Read a run back into a :class:`RunReport`: its JSON report (``--json`` output) or its
    ledger (``--ledger``, JSON Lines; rebuilt by :func:`~rlmesh_trio.load_ledger`).

    Raises:
        RunFileError: the file is missing, is not JSON, or is neither a report nor a ledger.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"{path}: cannot read: no such file") from None
    except OSError as exc:
        raise RunFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    text = _as_text(raw, path)
    if _is_ledger(text):
        return load_ledger(path)
    return report_from_dict(text, str(path))


#: File signatures of what people point ``report`` at by mistake.
_SIGNATURES = (
    (b"PK\x03\x04", "a zip archive (a results bundle?)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"\x1f\x8b", "a gzip file"),
)
_NOT_A_RUN = "not a run's JSON report (--json) or ledger (--ledger)"


def _as_text(raw: bytes, path: Path) -> str:
    """``raw`` as UTF-8 text, or a :class:`RunFileError` saying what the file is instead."""
    for signature, kind in _SIGNATURES:
        if raw.startswith(signature):
            raise RunFileError(f"{path}: is {kind}, {_NOT_A_RUN}")
    if raw[4:8] == b"ftyp" or raw.startswith(b"\x1a\x45\xdf\xa3"):
        raise RunFileError(f"{path}: is a video file, {_NOT_A_RUN}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(f"{path}: is a binary file, {_NOT_A_RUN}") from None


def _is_ledger(text: str) -> bool:
    """Whether ``text`` starts with a ledger header line."""
    try:
        header = json.loads(text.split("\n", 1)[0])
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("schema") == LEDGER_SCHEMA
