"""Every relative link of ``README.md`` and ``docs/`` resolves: the file, and its anchor.

Anchors are the ids the docs site gives headings (Python-Markdown's ``toc`` slugs:
lower case, punctuation dropped, spaces as hyphens, a repeated heading suffixed
``_1``, ``_2``...). ``mkdocs build --strict`` checks the site too, but needs the docs
extra and never reads the README; this runs with the test suite.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
CODE = re.compile(r"`+[^`\n]*`+")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text with fenced blocks and code spans blanked (their links are not links)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return CODE.sub(lambda m: "x" * len(m.group(0)) if "](" not in m.group(0) else "", text)


def slugify(heading: str) -> str:
    """Python-Markdown's ``toc`` slug of a heading's text (the inline markup already gone)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def heading_text(raw: str) -> str:
    raw = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # a link's text
    raw = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", raw)  # a cross-reference's text
    raw = raw.replace("`", "")
    return re.sub(r"(\*\*|\*|__)(.+?)\1", r"\2", raw)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text("utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(text):
        slug = slugify(heading_text(match.group(2)))
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}_{seen[slug]}"
        else:
            seen[slug] = 0
        found.add(slug)
    return found


def relative_links(page: Path) -> Iterator[tuple[int, str]]:
    text = prose(page.read_text("utf-8"))
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto: and the like
        yield text.count("\n", 0, match.start()) + 1, target


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """``file:line: target: why`` for every relative link of ``page`` that does not resolve."""
    problems = []
    for line, target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{line}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with that anchor in {dest.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    assert broken(page) == []


def test_the_checker_sees_links_and_anchors(tmp_path: Path) -> None:
    assert any("#" in t for page in PAGES for _, t in relative_links(page))
    assert "against-the-loop-you-would-write-by-hand" in anchors(ROOT / "docs" / "benchmarks.md")
    assert slugify(heading_text("Against rlmesh 0.1.0 (`compare_rlmesh.py`)")) == (
        "against-rlmesh-010-compare_rlmeshpy"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Title\n\nSee [a](#title_1), [b](#nope), [c](missing.md), "
        "`[not a link](nowhere.md)` and [d](https://example.com/x).\n\n"
        "```md\n[also not](gone.md)\n# Not a heading\n```\n",
        "utf-8",
    )
    found = [p.split(": ", 1)[1] for p in broken(page, tmp_path)]
    assert found == ["#nope: no heading with that anchor in page.md", "missing.md: no such file"]


def _nav_pages() -> list[str]:
    nav = (ROOT / "mkdocs.yml").read_text("utf-8").split("\nnav:", 1)[1]
    return re.findall(r"^\s*-\s+(?:[^:\n]+:\s+)?(\S+\.md)\s*$", nav, re.M)


def test_the_nav_lists_every_page_once() -> None:
    docs = ROOT / "docs"
    pages = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    nav = _nav_pages()
    assert sorted(nav) == pages, "mkdocs.yml's nav and the pages under docs/ differ"


def test_the_front_page_links_every_guide_page() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for _, t in relative_links(index)}
    wanted = [*sorted((ROOT / "docs" / "guide").glob("*.md")), ROOT / "docs" / "benchmarks.md"]
    missing = [p.relative_to(ROOT).as_posix() for p in wanted if p.resolve() not in linked]
    assert missing == [], f"docs/index.md does not link {missing}"
