"""The multi-route orchestrator: many routes under one nursery (its modules are private).

Its public names live at ``rlmesh_trio`` (``rt.run``, ``rt.run_routes``, ``rt.shard``,
``rt.Route``, ``rt.Orchestrator``, ``rt.RunReport``, ``rt.load_ledger``...); this
package exports nothing of its own now. The old ``rlmesh_trio.orchestrator.<name>``
paths still read, each with a ``DeprecationWarning`` naming the home, until the
release in ``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

__all__: list[str] = []

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
