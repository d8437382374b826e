"""In-process endpoints: a gymnasium env and a Python policy in the run's own process.

``rt.LocalEnv`` and ``rt.LocalModel`` speak the same endpoint protocols as the
remote clients, so a route runs the same loop over either; ``rt.RANDOM`` is the
seeded random baseline. Where a sync call runs (inline or on a worker thread) is
decided per call by :mod:`._placement`.

The three names live at ``rlmesh_trio``; this package exports nothing of its own
now. The old ``rlmesh_trio.inprocess.<name>`` paths still read, each with a
``DeprecationWarning`` naming the home, until the release in
``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

__all__: list[str] = []

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
