"""A run's report as plain values, and its JSON both ways.

It sits below both :mod:`rlmesh_trio.orchestrator` (which builds reports) and
:mod:`rlmesh_trio.results` (which films, plots and loads them), so neither
imports the other; the statistics and the bundles are defined here too, for
the report's own methods.

* ``rt.RunReport``, ``rt.RouteOutcome``, ``rt.RunMeta``, ``rt.RunFailed``: what a run
  produced (their one home is ``rlmesh_trio``).
* ``RunReport.to_json`` / :func:`report_from_dict`: the JSON report, written and read;
  :class:`RecordedError` is an error read back from one.
* :class:`RouteSet` / :class:`RouteStatus`: a report's routes by how they ended.
* The statistics (``summarize``, ``compare_rewards``...) and the bundles
  (``write_bundle``...) have their one home in :mod:`rlmesh_trio.results`.

The old ``rlmesh_trio.report.<name>`` paths of the moved names still read, each
with a ``DeprecationWarning`` naming the home, until the release in
``rlmesh_trio._deprecated.REMOVED_IN``.
"""

from typing import TYPE_CHECKING

from ._decode import RecordedError
from ._outcome import RouteSet, RouteStatus
from ._report import REPORT_SCHEMA, REPORT_VERSION, report_from_dict
from ._stats import DEFAULT_SEED

__all__ = [
    "DEFAULT_SEED",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "RecordedError",
    "RouteSet",
    "RouteStatus",
    "report_from_dict",
]

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
