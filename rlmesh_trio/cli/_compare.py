"""``rlmesh-trio compare A.json B.json``: is run B's mean return different from run A's?"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .._errors import RlmeshTrioError
from .._words import counted
from ._checks import user_message

__all__ = ["compare_cmd"]


@click.command("compare")
@click.argument("run_a", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--seed", type=int, default=None, help="Bootstrap seed (default: fixed, so reruns agree)."
)
def compare_cmd(run_a: Path, run_b: Path, seed: int | None) -> None:
    """Print mean(B) - mean(A) of the episode returns with a 95% bootstrap CI.

    The two runs are independent samples (scipy.stats.bootstrap, percentile,
    2000 resamples, seeded). The last line says whether the interval excludes
    zero. A warning comes first when the runs used different envs or seeds, or
    one did not finish every route.
    """
    from ..report import DEFAULT_SEED
    from ..results import compare_rewards, load_run, run_differences
    from ._results import need_extra
    from ._stats_table import format_interval, format_value

    need_extra("scipy.stats", extra="results", purpose="compare (bootstrap intervals, scipy)")
    try:
        a, b = load_run(run_a), load_run(run_b)
    except RlmeshTrioError as exc:
        click.echo(f"error: {user_message(exc)}", err=True)
        sys.exit(2)
    for difference in run_differences(a, b):
        click.echo(f"warning: {difference}", err=True)
    diff = compare_rewards(
        [ep.reward for ep in a.episodes],
        [ep.reward for ep in b.episodes],
        seed=DEFAULT_SEED if seed is None else seed,
    )
    for name, path, n, mean in (
        ("A", run_a, diff.n_a, diff.mean_a),
        ("B", run_b, diff.n_b, diff.mean_b),
    ):
        click.echo(f"{name}  {path}: {counted(n, 'episode')}, mean return {format_value(mean)}")
    click.echo(f"B - A = {format_value(diff.difference)}, 95% CI {format_interval(diff.ci)}")
    if diff.excludes_zero is None:
        click.echo("no interval: each run needs at least two episodes")
    elif diff.excludes_zero:
        better = "B" if (diff.difference or 0) > 0 else "A"
        click.echo(f"the interval excludes zero: {better} has the higher mean return")
    else:
        click.echo("the interval includes zero: no clear difference at 95%")
