"""``docs/guide/cli.md`` lists every command and every option the command line has, and no other.

The command tree is walked from ``rlmesh_trio.cli`` itself (the click group), so a new
option, a renamed one or a new command fails here until the page names it:
``python scripts/gen_cli_doc.py`` regenerates the page's option tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from rlmesh_trio.cli._main import cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "cli.md"
PROG = "rlmesh-trio"
HEADING = re.compile(r"^### `(rlmesh-trio(?: [a-z-]+)*)`\s*$", re.M)


def command_tree() -> dict[str, click.Command]:
    """Every command by its full name, the group itself included."""
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, name: str) -> None:
        found[name] = command
        if isinstance(command, click.Group):
            for sub_name, sub in command.commands.items():
                if not sub.hidden:
                    walk(sub, f"{name} {sub_name}")

    walk(cli, PROG)
    return found


def option_names(command: click.Command) -> set[str]:
    """Every spelling of every visible option (``--help`` aside, click's own)."""
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names.update(param.opts, param.secondary_opts)
    return names - {"-h", "--help"}


def page_sections() -> dict[str, str]:
    """The text under each ``### `rlmesh-trio ...``` heading, up to the next heading."""
    text = PAGE.read_text("utf-8")
    matches = list(HEADING.finditer(text))
    sections = {}
    ends = [m.start() for m in matches[1:]] + [len(text)] * bool(matches)
    for match, end in zip(matches, ends, strict=True):
        body = text[match.end() : end]
        cut = re.search(r"^#{1,3} ", body, re.M)
        sections[match.group(1)] = body[: cut.start()] if cut else body
    return sections


def documented_options(section: str) -> set[str]:
    """The option spellings in the first cell of each table row of a section."""
    found: set[str] = set()
    for line in section.splitlines():
        cell = re.match(r"^\|\s*`([^`]*)`\s*\|", line)
        if cell:
            found.update(t for t in re.split(r"[\s,/]+", cell.group(1)) if t.startswith("-"))
    return found


def test_every_command_has_a_section() -> None:
    commands = set(command_tree())
    sections = set(page_sections())
    assert commands - sections == set(), "commands missing from cli.md (scripts/gen_cli_doc.py)"
    assert sections - commands == set(), "cli.md documents commands that no longer exist"


def test_every_option_is_documented_under_its_command() -> None:
    sections = page_sections()
    problems = []
    for name, command in command_tree().items():
        real = option_names(command)
        listed = documented_options(sections.get(name, ""))
        problems += [f"{name}: {opt} is not in cli.md" for opt in sorted(real - listed)]
        problems += [f"{name}: cli.md lists {opt}, which it lacks" for opt in sorted(listed - real)]
    assert problems == [], "run `python scripts/gen_cli_doc.py`:\n" + "\n".join(problems)


def test_the_walk_sees_the_options_the_page_promised() -> None:
    """The walk is not vacuous: the options this page once lacked are found and listed."""
    tree = command_tree()
    assert f"{PROG} watch" in tree
    sections = page_sections()
    run = documented_options(sections[f"{PROG} run"])
    promised = ("--dashboard", "--backend", "--shards", "--retries", "--tls", "--batch-predicts")
    for option in promised:
        assert option in option_names(tree[f"{PROG} run"]) and option in run, option
    assert "--limit" in documented_options(sections[f"{PROG} serve-env"])
