"""No page or docstring says our servers or clients run on grpclib or asyncio.

They run on Trio over our own I/O-free wire core (``rlmesh_trio/_wire``, driving h2
through its public API); grpclib is only an independent peer in the tests, and rlmesh
0.1.0's own servers are the ones on grpclib and asyncio. Every sentence of
``docs/``, ``README.md`` and the package's module, class and function docstrings
(read with ``ast``) that names grpclib or asyncio next to a server, a client, a
transport or a bridge must be on :data:`ALLOWED`: a sentence about another peer, or
one that says what we do *not* use. A new such sentence is read by a person before
it goes on the list.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from .._package_scan import PACKAGE, package_modules

ROOT = Path(__file__).resolve().parents[2]

LIBRARY = re.compile(r"\b(grpclib|asyncio)\b", re.I)
ROLE = re.compile(r"\b(serv(e|es|er|ers|ing|ed|ices?)|clients?|transports?|bridge)\b", re.I)

#: (file, a fragment of the sentence) -> why the sentence may name grpclib or asyncio.
ALLOWED: dict[tuple[str, str], str] = {
    ("README.md", "(no grpclib, no asyncio)"): "says what our servers do not use",
    ("docs/guide/servers.md", "imports asyncio or grpclib"): "says no part of us imports them",
    ("docs/guide/python-api.md", "leaves asyncio alone"): "says our clients leave asyncio alone",
    ("rlmesh_trio/orchestrator/_entry.py", "as out of every module of the package"): "says no "
    "module imports asyncio",
}


def _sentences(text: str) -> Iterator[str]:
    """The sentences of prose or Markdown: paragraphs, list items and table rows apart."""
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        starts_item = re.match(r"([-*+]|\d+\.|\||#+)\s", stripped) is not None
        if not stripped or starts_item:
            if block:
                yield from _split(" ".join(block))
            block = [stripped] if starts_item else []
        else:
            block.append(stripped)


def _split(paragraph: str) -> Iterator[str]:
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        yield " ".join(sentence.split())


def _docstrings(source: str) -> Iterator[str]:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                yield doc


def texts() -> Iterator[tuple[str, str]]:
    """(file, text) for README, every docs page and every docstring of the package."""
    yield "README.md", (ROOT / "README.md").read_text("utf-8")
    for page in sorted((ROOT / "docs").rglob("*.md")):
        yield page.relative_to(ROOT).as_posix(), page.read_text("utf-8")
    for module in package_modules():
        name = f"rlmesh_trio/{module.as_posix()}"
        for doc in _docstrings((PACKAGE / module).read_text("utf-8")):
            yield name, doc


def claims() -> list[tuple[str, str]]:
    """(file, sentence) for every sentence naming grpclib or asyncio next to a peer's role."""
    return [
        (name, sentence)
        for name, text in texts()
        for sentence in _sentences(text)
        if LIBRARY.search(sentence) and ROLE.search(sentence)
    ]


def _allowed_by(name: str, sentence: str) -> tuple[str, str] | None:
    for key in ALLOWED:
        if key[0] == name and key[1] in sentence:
            return key
    return None


def test_no_text_puts_our_servers_or_clients_on_grpclib_or_asyncio() -> None:
    offenders = [f"{name}: {s}" for name, s in claims() if _allowed_by(name, s) is None]
    assert offenders == [], (
        "our servers and clients run on Trio over rlmesh_trio/_wire (h2), not on grpclib or "
        "asyncio; fix the sentence, or, if it is about another peer, add it to ALLOWED:\n"
        + "\n".join(offenders)
    )


def test_every_allowed_sentence_still_exists() -> None:
    used = {_allowed_by(name, s) for name, s in claims()}
    stale = [key for key in ALLOWED if key not in used]
    assert stale == [], f"ALLOWED entries that match no sentence any more: {stale}"


def test_the_scan_catches_the_old_wording() -> None:
    old = (
        "`rt.serve_env` and `rt.serve_model` run each server on a thread of its own (a\n"
        "plain asyncio loop on grpclib's public API; the env or policy belongs to that\n"
        "thread while the block runs)."
    )
    found = [s for s in _sentences(old) if LIBRARY.search(s) and ROLE.search(s)]
    assert len(found) == 1
    assert _allowed_by("docs/guide/python-api.md", found[0]) is None
    docstring = '"""Runs on Trio (in process) and on asyncio (the grpclib server)."""\n'
    assert [d for d in _docstrings(docstring) if LIBRARY.search(d) and ROLE.search(d)]
