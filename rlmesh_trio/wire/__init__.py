"""Deprecated: the wire core is private now (``rlmesh_trio._wire``).

Only ``ServerLimits`` was ever meant for users; it lives at ``rlmesh_trio.ServerLimits``.
Every name the old public ``rlmesh_trio.wire`` exported still reads from here,
with a ``DeprecationWarning``, until the release in ``rlmesh_trio._deprecated.REMOVED_IN``
(the names are ``rlmesh_trio._deprecated.MOVED["rlmesh_trio.wire"]``).
"""

from .._deprecated import moved_names

__all__: list[str] = []

__getattr__, __dir__ = moved_names(__name__, listed=lambda: sorted(__all__))
