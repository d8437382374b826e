"""Deprecated: the hook event classes live in :mod:`rlmesh_trio.hooks.events`.

Every name this module exported still reads from here, with a ``DeprecationWarning``,
until the release in ``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

__all__: list[str] = []

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
