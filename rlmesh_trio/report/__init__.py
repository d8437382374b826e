"""A run's report as plain values, and its serializations: JSON both ways, statistics, bundles.

It sits below both :mod:`rlmesh_trio.orchestrator` (which builds reports) and
:mod:`rlmesh_trio.results` (which films, plots and loads them), so neither
imports the other.

* :class:`RunReport`, :class:`RouteOutcome`, :class:`RunMeta`: what a run produced.
* :meth:`RunReport.to_json` / :func:`report_from_dict`: the JSON report, written and read.
* :func:`summarize`, :func:`compare_rewards`, :func:`statistics_block`: seeded bootstrap
  figures (scipy, from the ``results`` extra, imported when first needed).
* :func:`write_bundle` / :meth:`RunReport.export_bundle`: ``rlmesh.result.v1`` bundles.
"""

from ._bundle import SCHEMA, MediaRef, bundle_document, write_bundle
from ._decode import RecordedError
from ._outcome import RouteOutcome, RouteSet, RouteStatus, RunMeta
from ._report import REPORT_SCHEMA, REPORT_VERSION, RunFailed, RunReport, report_from_dict
from ._stats import (
    DEFAULT_SEED,
    Difference,
    Summary,
    compare_rewards,
    resample_batch,
    statistics_block,
    summarize,
)

__all__ = [
    "DEFAULT_SEED",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "SCHEMA",
    "Difference",
    "MediaRef",
    "RecordedError",
    "RouteOutcome",
    "RouteSet",
    "RouteStatus",
    "RunFailed",
    "RunMeta",
    "RunReport",
    "Summary",
    "bundle_document",
    "compare_rewards",
    "report_from_dict",
    "resample_batch",
    "statistics_block",
    "summarize",
    "write_bundle",
]
