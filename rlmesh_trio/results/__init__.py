"""Results people look at: rlmesh.result.v1 bundles, episode videos, statistics, HTML reports.

* :func:`summarize`, :func:`compare_rewards`, :func:`statistics_block`: seeded bootstrap figures.
* :func:`run_differences`: what makes two runs hard to compare (envs, seeds, unfinished).
* :class:`Recording`: film chosen episodes to mp4 (``Recording(first=1).apply(routes)``).
* :func:`write_bundle` / :meth:`RunReport.export_bundle`: ``rlmesh.result.v1`` bundles.
* :func:`write_html`: one self-contained HTML report.
* :func:`load_run`: a run's JSON report or ledger back as a :class:`~rlmesh_trio.RunReport`.

The statistics, bundle and JSON reading live with the report's values in
:mod:`rlmesh_trio.report` and are re-exported here. Heavy parts are imported
only when a function here needs them, each from its extra: scipy and plotly
(``results``), PyAV (``video``).
"""

from ..report import (
    SCHEMA,
    Difference,
    MediaRef,
    RecordedError,
    Summary,
    bundle_document,
    compare_rewards,
    report_from_dict,
    resample_batch,
    statistics_block,
    summarize,
    write_bundle,
)
from ._differ import run_differences
from ._html import render_html, write_html
from ._load import load_run
from ._record import Recording

__all__ = [
    "SCHEMA",
    "Difference",
    "MediaRef",
    "RecordedError",
    "Recording",
    "Summary",
    "bundle_document",
    "compare_rewards",
    "load_run",
    "render_html",
    "report_from_dict",
    "resample_batch",
    "run_differences",
    "statistics_block",
    "summarize",
    "write_bundle",
    "write_html",
]
