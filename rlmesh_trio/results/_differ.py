"""What makes two runs hard to compare: other envs, other seeds, a run that did not finish.

:func:`run_differences` is what ``rlmesh-trio compare`` warns about before it
prints the difference of the mean returns; a difference of models is the point
of a comparison and is not reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..orchestrator import RunReport

__all__ = ["run_differences"]

#: Env labels that say nothing about the env (a report rebuilt from an old ledger).
_UNKNOWN = frozenset({"", "?"})


def run_differences(a: RunReport, b: RunReport) -> list[str]:
    """One sentence per way runs A and B differ beyond their models (empty: comparable).

    Checked: the envs the routes ran against, the episode seeds (as multisets),
    and whether each run finished every route.
    """
    found = []
    envs_a, envs_b = _envs(a), _envs(b)
    if envs_a and envs_b and envs_a != envs_b:
        found.append(f"the runs used different envs: A {_listed(envs_a)}, B {_listed(envs_b)}")
    seeds = _seed_difference(a, b)
    if seeds:
        found.append(seeds)
    for name, report in (("A", a), ("B", b)):
        partial = _partial(report)
        if partial:
            found.append(f"{name} is partial: {partial}")
    return found


def _envs(report: RunReport) -> set[str]:
    return {o.env for o in report.routes if o.env not in _UNKNOWN}


def _listed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _seed_difference(a: RunReport, b: RunReport) -> str | None:
    seeds_a = Counter(ep.seed for ep in a.episodes if ep.seed is not None)
    seeds_b = Counter(ep.seed for ep in b.episodes if ep.seed is not None)
    if seeds_a == seeds_b:
        return None
    if not seeds_a or not seeds_b:
        unseeded = "A" if not seeds_a else "B"
        return f"the runs used different seeds: {unseeded} has no episode seeds"
    common = sum((seeds_a & seeds_b).values())
    return (
        "the runs used different seeds: "
        f"A {_seed_span(seeds_a)}, B {_seed_span(seeds_b)}, {common} in common"
    )


def _seed_span(seeds: Counter[int]) -> str:
    count = sum(seeds.values())
    low, high = min(seeds), max(seeds)
    noun = "seed" if count == 1 else "seeds"
    return f"{count} {noun} in {low}..{high}" if low != high else f"{count} {noun} ({low})"


def _partial(report: RunReport) -> str | None:
    unfinished = [o for o in report.routes if o.status != "completed"]
    if not unfinished:
        return None
    statuses = Counter(o.status for o in unfinished)
    how = " and ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    total = len(report.routes)
    return f"{len(unfinished)} of {total} route{'s' if total != 1 else ''} did not finish ({how})"
