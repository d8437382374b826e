"""What one run of a ``hand_loop.py`` row yields, and how it is measured.

A row's run builds its envs (not timed: every side pays that once, and
AsyncVectorEnv's 32 subprocesses would swamp a short run), then times the
evaluation itself with :meth:`Meter.timed`. Memory is the unique set size
(psutil's USS: pages shared with a forked parent count once) after the run
minus before the envs were built, over this process, its children
(AsyncVectorEnv's workers) and any server processes the row names. Rough:
an allocator keeps what an earlier row freed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import psutil

Outcome = tuple[int, float]
"""One episode: (steps, return)."""


class Refused(Exception):
    """The tree refuses this row's shape (the row prints "refused")."""


@dataclass
class Sample:
    """One timed run: scored steps, wall seconds, episodes, memory.

    ``by_seed`` maps seed -> outcome where the side reports which seed each
    episode ran; ``outcomes`` lists every scored episode (sides whose envs
    take the seeds from a shared queue report only these; compared as a
    multiset). ``rss_bytes`` is the memory the run added (see the module doc).
    """

    steps: int
    wall: float
    outcomes: list[Outcome]
    by_seed: dict[int, Outcome] | None
    rss_bytes: int | None = None

    @property
    def rate(self) -> float:
        return self.steps / self.wall if self.wall > 0 else 0.0


def _rss(extra_pids: Iterable[int]) -> int:
    me = psutil.Process()
    procs = [me, *me.children(recursive=True)]
    for pid in extra_pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            # USS, not RSS: forked workers share the parent's pages (torch...), which RSS
            # would count once per worker.
            total += proc.memory_full_info().uss
    return total


class Meter:
    """Memory before the envs are built, the wall time of the evaluation, memory after it.

    ``server_pids``: processes whose whole resident set counts for the row (their
    lanes live there), read once after the run.
    """

    def __init__(self, server_pids: Iterable[int] = ()) -> None:
        self._server_pids = tuple(server_pids)
        self._before = _rss(())
        self.wall = 0.0

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.wall = time.perf_counter() - start

    def sample(self, outcomes: list[Outcome], by_seed: dict[int, Outcome] | None = None) -> Sample:
        """The run's sample; call it before the envs are closed (their memory counts)."""
        rss = _rss(self._server_pids) - self._before
        steps = sum(steps for steps, _ in outcomes)
        return Sample(steps, self.wall, outcomes, by_seed, rss)


def by_seed_sample(meter: Meter, by_seed: dict[int, Outcome]) -> Sample:
    """A sample from episodes keyed by seed."""
    return meter.sample(list(by_seed.values()), by_seed)


def agreement(reference: Sample, sample: Sample) -> str | None:
    """``None`` when ``sample``'s episodes are the reference's; else what differs (one line)."""
    if sample.by_seed is not None and reference.by_seed is not None:
        if sample.by_seed == reference.by_seed:
            return None
        want = reference.by_seed
        differ = sorted(seed for seed in want if sample.by_seed.get(seed) != want[seed])
        extra = sorted(set(sample.by_seed) - set(reference.by_seed))
        first = differ[0] if differ else extra[0]
        theirs, ours = sample.by_seed.get(first), reference.by_seed.get(first)
        return f"{len(differ) + len(extra)} seeds differ, seed {first}: {theirs} vs {ours}"
    if sorted(sample.outcomes) == sorted(reference.outcomes):
        return None
    return (
        f"episode multisets differ ({len(sample.outcomes)} vs {len(reference.outcomes)} episodes, "
        f"{sample.steps} vs {reference.steps} steps)"
    )
