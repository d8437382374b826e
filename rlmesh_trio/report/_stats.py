"""Figures that support a decision: mean, spread and bootstrap confidence intervals.

Every interval is one call of :func:`scipy.stats.bootstrap`, exactly::

    scipy.stats.bootstrap(
        samples, statistic, n_resamples=2000, confidence_level=0.95,
        method="percentile", vectorized=True, paired=False,
        batch=resample_batch(samples), rng=numpy.random.default_rng(seed),
    )

with ``seed`` 20240917 unless given, so the same episodes always give the
same figures. ``samples`` is one sample (the run's or a route's returns) or
two independent ones (``compare``: A then B, statistic ``mean(B) - mean(A)``),
non-finite returns dropped. ``resample_batch`` is ``None`` (scipy's default:
all resamples at once) up to 5,000 episodes in all; above that it is
``10_000_000 // episodes`` resamples per batch, so memory stays near 80 MB
whatever the run's size (the batch changes which resamples are drawn, not the
method). When every sample's returns are all equal, the interval is the
point itself (scipy would report a degenerate sample). scipy comes with the
``results`` extra; without it these functions raise
:class:`~rlmesh_trio.MissingExtra` naming it. The IQM is the
interquartile mean (the mean of the middle 50% of episodes, as the rliable
paper recommends, ``scipy.stats.trim_mean(x, 0.25)``); its interval is
bootstrapped the same way.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from .._extras import require

if TYPE_CHECKING:
    from types import ModuleType

    from ._outcome import RouteSet

__all__ = [
    "CONFIDENCE",
    "DEFAULT_SEED",
    "Difference",
    "Summary",
    "compare_rewards",
    "resample_batch",
    "statistics_block",
    "summarize",
]

#: Level of every interval here.
CONFIDENCE = 0.95
#: The bootstrap's seed unless told otherwise: figures are reproducible run to run.
DEFAULT_SEED = 20240917
N_RESAMPLES = 2000
#: Resampled values held at once before the resamples are drawn in batches (about 80 MB).
MAX_RESAMPLED_VALUES = 10_000_000


def resample_batch(samples: Sequence[Sized]) -> int | None:
    """scipy's ``batch`` for these samples: ``None`` (all at once) while the resamples fit in
    ``MAX_RESAMPLED_VALUES`` values, else as many resamples per batch as fit (at least 1)."""
    episodes = sum(len(sample) for sample in samples)
    if episodes * N_RESAMPLES <= MAX_RESAMPLED_VALUES:
        return None
    return max(1, MAX_RESAMPLED_VALUES // episodes)


def _scipy_stats() -> ModuleType:
    return require("scipy.stats", extra="results", purpose="computing bootstrap statistics (scipy)")


def _finite(values: Iterable[float]) -> np.ndarray:
    array = np.asarray([float(v) for v in values], dtype=np.float64)
    return array[np.isfinite(array)]


def _iqm(sample: np.ndarray, axis: int = -1) -> Any:
    return _scipy_stats().trim_mean(sample, 0.25, axis=axis)


def _mean(sample: np.ndarray, axis: int = -1) -> Any:
    return np.mean(sample, axis=axis)


def _interval(
    samples: tuple[np.ndarray, ...], statistic: Callable[..., Any], seed: int
) -> tuple[float, float] | None:
    """The bootstrap percentile interval of ``statistic``; ``None`` below two episodes a sample."""
    stats = _scipy_stats()
    if any(len(sample) < 2 for sample in samples):
        return None
    if all(np.ptp(sample) == 0 for sample in samples):
        # Every resample is identical: the interval is the point itself.
        point = float(statistic(*samples, axis=-1))
        return point, point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DegenerateDataWarning on near-constant samples
        result = stats.bootstrap(
            samples,
            statistic,
            n_resamples=N_RESAMPLES,
            confidence_level=CONFIDENCE,
            method="percentile",
            vectorized=True,
            paired=False,
            batch=resample_batch(samples),
            rng=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return low, high


@attrs.frozen
class Summary:
    """The figures of one sample of episode returns (``None`` where they are undefined).

    ``std`` is the sample standard deviation (ddof=1); the ``*_ci`` pairs are
    95% bootstrap intervals, ``None`` with fewer than two episodes.
    """

    n: int
    mean: float | None
    std: float | None
    mean_ci: tuple[float, float] | None
    iqm: float | None
    iqm_ci: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            "meanCi": list(self.mean_ci) if self.mean_ci else None,
            "iqm": self.iqm,
            "iqmCi": list(self.iqm_ci) if self.iqm_ci else None,
        }


def summarize(values: Iterable[float], *, seed: int = DEFAULT_SEED) -> Summary:
    """Mean, std, IQM and their 95% bootstrap intervals of ``values`` (non-finite ones dropped).

    Empty input gives every figure ``None``.

    Raises:
        MissingExtra: scipy (the ``results`` extra) is not installed.
    """
    sample = _finite(values)
    if len(sample) == 0:
        return Summary(0, None, None, None, None, None)
    std = float(np.std(sample, ddof=1)) if len(sample) > 1 else None
    return Summary(
        n=len(sample),
        mean=float(np.mean(sample)),
        std=std,
        mean_ci=_interval((sample,), _mean, seed),
        iqm=float(_iqm(sample)),
        iqm_ci=_interval((sample,), _iqm, seed),
    )


def statistics_block(report: RouteSet, *, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The JSON report's ``statistics``: episode returns per route and over the whole run.

    Raises:
        MissingExtra: scipy (the ``results`` extra) is not installed.
    """
    routes = {
        outcome.route_id: summarize((ep.reward for ep in outcome.episodes), seed=seed).to_dict()
        for outcome in report.routes
    }
    return {
        "metric": "reward",
        "confidence": CONFIDENCE,
        "method": "bootstrap percentile",
        "resamples": N_RESAMPLES,
        "seed": seed,
        "run": summarize(
            (ep.reward for outcome in report.routes for ep in outcome.episodes), seed=seed
        ).to_dict(),
        "routes": routes,
    }


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> Any:
    return np.mean(b, axis=axis) - np.mean(a, axis=axis)


@attrs.frozen
class Difference:
    """``mean(B) - mean(A)`` with its 95% bootstrap interval (two independent samples)."""

    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None
    ci: tuple[float, float] | None

    @property
    def excludes_zero(self) -> bool | None:
        """Whether the interval lies wholly on one side of zero (``None``: no interval)."""
        if self.ci is None:
            return None
        return self.ci[0] > 0 or self.ci[1] < 0


def compare_rewards(
    a: Sequence[float], b: Sequence[float], *, seed: int = DEFAULT_SEED
) -> Difference:
    """The difference of two runs' mean returns, B minus A, with a seeded bootstrap CI.

    Raises:
        MissingExtra: scipy (the ``results`` extra) is not installed.
    """
    sample_a, sample_b = _finite(a), _finite(b)
    mean_a = float(np.mean(sample_a)) if len(sample_a) else None
    mean_b = float(np.mean(sample_b)) if len(sample_b) else None
    difference = mean_b - mean_a if mean_a is not None and mean_b is not None else None
    ci = _interval((sample_a, sample_b), _mean_difference, seed)
    return Difference(len(sample_a), len(sample_b), mean_a, mean_b, difference, ci)
