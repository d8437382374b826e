"""A griffe extension for the docs build: Sphinx roles in docstrings read as code.

The docstrings name things the Sphinx way (``:class:`~rlmesh_trio.RunReport```);
mkdocstrings reads Markdown, where the role would print as it is written. Each
role becomes an inline code span of the name it shows (the last part after a
``~``). mkdocs.yml loads it (``extensions: [scripts/docs_roles.py:SphinxRoles]``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):`(~?)([^`]+)`")


def as_code(text: str) -> str:
    """``text`` with every Sphinx role turned into a Markdown code span."""

    def span(match: re.Match[str]) -> str:
        short, name = match.group(1), match.group(2)
        return f"`{name.rsplit('.', 1)[-1] if short else name}`"

    return _ROLE.sub(span, text)


class SphinxRoles(griffe.Extension):
    """Rewrites each docstring's Sphinx roles as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_code(obj.docstring.value)
