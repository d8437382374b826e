"""The public entry points' "Raises:" sections name every exception a caller can get.

The lists are what each body and the calls under it raise (read from the code,
issue 35 item 5); a docstring that drops one fails here.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

import rlmesh_trio as rt

#: Kinds of InvalidSpec a run's ledger check raises, named inside its entry.
LEDGER_KINDS = {"LedgerExists", "PlanMismatch", "LedgerError"}
SERVER = {"TypeError", "ValueError", "InvalidSpec", "OSError", "RuntimeError", "trio.Cancelled"}
RUN = {"InvalidSpec", "TypeError", "WrongEventLoop", "RunFailed", "RunInterrupted"}

#: name -> (the callable, classes with an entry of their own, names inside an entry).
EXPECTED: dict[str, tuple[Callable[..., Any], set[str], set[str]]] = {
    "run": (rt.run, RUN, LEDGER_KINDS),
    "run_routes": (rt.run_routes, RUN | {"trio.Cancelled"}, LEDGER_KINDS),
    "shard": (rt.shard, {"InvalidSpec", "TypeError"}, set()),
    "serve_env": (rt.serve_env, SERVER, set()),
    "serve_model": (rt.serve_model, SERVER, set()),
}


def _raises_section(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    _, found, section = doc.partition("\nRaises:\n")
    assert found, f"{fn.__qualname__} has no Raises: section"
    return section


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_raises_names_every_exception(name: str) -> None:
    fn, entries, kinds = EXPECTED[name]
    section = _raises_section(fn)
    listed = set(re.findall(r"^\s{4}([\w.]+):", section, flags=re.MULTILINE))
    assert entries <= listed, f"{name}'s Raises: has no entry for {sorted(entries - listed)}"
    mentioned = set(re.findall(r"[\w.]+", section))
    assert kinds <= mentioned, f"{name}'s Raises: does not name {sorted(kinds - mentioned)}"
