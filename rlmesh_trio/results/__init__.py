"""Results people look at: rlmesh.result.v1 bundles, episode videos, statistics, HTML reports.

Heavy parts (scipy, plotly, PyAV) are imported only when a function here needs them.
"""

from ._bundle import SCHEMA, MediaRef, bundle_document, write_bundle
from ._load import RecordedError, load_run, report_from_dict
from ._stats import Difference, Summary, compare_rewards, statistics_block, summarize

__all__ = [
    "SCHEMA",
    "Difference",
    "MediaRef",
    "RecordedError",
    "Summary",
    "bundle_document",
    "compare_rewards",
    "load_run",
    "report_from_dict",
    "statistics_block",
    "summarize",
    "write_bundle",
]
