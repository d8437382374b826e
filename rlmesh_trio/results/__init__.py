"""Results people look at: rlmesh.result.v1 bundles, episode videos, statistics, HTML reports.

* :func:`summarize`, :func:`compare_rewards`, :func:`statistics_block`: seeded bootstrap figures.
* :func:`run_differences`: what makes two runs hard to compare (envs, seeds, unfinished).
* :class:`Recording`: film chosen episodes to mp4 (``Recording(first=1).apply(routes)``).
* :func:`write_bundle` / :meth:`RunReport.export_bundle`: ``rlmesh.result.v1`` bundles.
* :func:`write_html`: one self-contained HTML report.
* :func:`load_run`: a run's JSON report or ledger back as a :class:`~rlmesh_trio.RunReport`.

The statistics and the bundles are defined with the report's values (whose
methods use them) and have their one home here; reading a JSON report back
(``report_from_dict``, ``RecordedError``) is :mod:`rlmesh_trio.report`'s, and
their old paths here still read, with a ``DeprecationWarning``, until the release
in ``rlmesh_trio._deprecated.REMOVED_IN``. Heavy parts are imported
only when a function here needs them, each from its extra: scipy and plotly
(``results``), PyAV (``video``).
"""

from typing import TYPE_CHECKING

from ..report._bundle import SCHEMA, MediaRef, bundle_document, write_bundle
from ..report._stats import (
    Difference,
    Summary,
    compare_rewards,
    resample_batch,
    statistics_block,
    summarize,
)
from ._differ import run_differences
from ._html import render_html, write_html
from ._load import load_run
from ._record import Recording

__all__ = [
    "SCHEMA",
    "Difference",
    "MediaRef",
    "Recording",
    "Summary",
    "bundle_document",
    "compare_rewards",
    "load_run",
    "render_html",
    "resample_batch",
    "run_differences",
    "statistics_block",
    "summarize",
    "write_bundle",
    "write_html",
]

if not TYPE_CHECKING:  # type checkers see no old path, so our own code cannot use one
    from .._deprecated import moved_names

    __getattr__, __dir__ = moved_names(__name__)
