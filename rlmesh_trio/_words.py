"""Small wording helpers shared by the CLI and the results: counts with their nouns."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 episode"``, ``"2 episodes"``, ``"1,200 episodes"`` (thousands separated)."""
    word = noun if n == 1 else (plural or f"{noun}s")
    return f"{n:,} {word}"
