"""What makes two runs hard to compare: other envs, other seeds, a run that did not finish.

:func:`run_differences` is what ``rlmesh-trio compare`` warns about before it
prints the difference of the mean returns; a difference of models is the point
of a comparison and is not reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .._errors import InvalidSpec
from ..transport._address import parse_address

if TYPE_CHECKING:
    from ..report._report import RunReport

__all__ = ["run_differences"]

#: Env labels that say nothing about the env (a report rebuilt from an old ledger).
_UNKNOWN = frozenset({"", "?"})


def run_differences(a: RunReport, b: RunReport) -> list[str]:
    """One sentence per way runs A and B differ beyond their models (empty: comparable).

    Checked: the envs the routes ran against, the episode seeds (as multisets),
    and whether each run finished every route.

    An env is what it said in its handshake (``RouteOutcome.env_contract``):
    its env id, and its spaces when both runs recorded them; not its label,
    which for a served env is only its address (two CartPole servers on two
    ports, or a served and an in-process CartPole, are the same env). A route
    of an older report, without a contract, counts by its label, unless that
    label is an address (which says nothing about the env) or unknown.
    """
    found = []
    envs = _env_difference(a, b)
    if envs:
        found.append(envs)
    seeds = _seed_difference(a, b)
    if seeds:
        found.append(seeds)
    for name, report in (("A", a), ("B", b)):
        partial = _partial(report)
        if partial:
            found.append(f"{name} is partial: {partial}")
    return found


def _env_difference(a: RunReport, b: RunReport) -> str | None:
    envs_a, envs_b = _envs(a), _envs(b)
    if not envs_a or not envs_b:
        return None
    ids_a, ids_b = {env_id for env_id, _ in envs_a}, {env_id for env_id, _ in envs_b}
    if ids_a != ids_b:
        return f"the runs used different envs: A {_listed(ids_a)}, B {_listed(ids_b)}"
    if any(spaces is None for _, spaces in envs_a | envs_b) or envs_a == envs_b:
        return None  # an older report's route: its env id is all there is to compare
    return (
        "the runs used envs with the same ids but other spaces: "
        f"A {_listed(_with_spaces(envs_a))}, B {_listed(_with_spaces(envs_b))}"
    )


def _envs(report: RunReport) -> set[tuple[str, str | None]]:
    """``(env id, spaces digest)`` per route; ``(label, None)`` for a route without a contract
    whose label names an env; routes that say nothing about their env are left out."""
    found: set[tuple[str, str | None]] = set()
    for outcome in report.routes:
        contract = outcome.env_contract
        if contract and contract.get("env_id"):
            found.add((str(contract["env_id"]), contract.get("spaces") or None))
        elif outcome.env not in _UNKNOWN and not _is_address(outcome.env):
            found.add((outcome.env, None))
    return found


def _is_address(label: str) -> bool:
    try:
        parse_address(label)
    except InvalidSpec:
        return False
    return True


def _with_spaces(envs: Iterable[tuple[str, str | None]]) -> list[str]:
    return [f"{env_id} (spaces {spaces})" for env_id, spaces in envs]


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
