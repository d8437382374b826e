"""``rlmesh-trio run``: one route per --env, locally, durably, or sharded over a backend."""

from __future__ import annotations

import functools
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._errors import InvalidSpec, RlmeshTrioError
from ._checks import check_report_path, spec_mistake, user_message
from ._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    client_options,
    fail,
)
from ._dashboard import close_dashboard, dashboard_options, open_dashboard
from ._distributed import backend_options, check_backend_options, run_distributed_cli
from ._durable import durable_kwargs, durable_options
from ._results import ResultsOptions, results_options
from ._summary import print_summary, write_report
from ._targets import build_first_envs, parse_limits, parse_seeds, resolve_model
from ._tls import client_tls_options

if TYPE_CHECKING:  # the orchestrator is imported when the command runs, not for --help
    from ..orchestrator._run import Orchestrator
    from ..report._report import RunReport

__all__ = ["run_cmd", "write_outputs"]


@click.command("run")
@click.option(
    "--env",
    "envs",
    multiple=True,
    required=True,
    help="An env endpoint (address, gymnasium id or module:factory, imported from the "
    "current folder first); repeat for more routes.",
)
@click.option(
    "--model",
    required=True,
    help="A model address, `random` (samples the action space, seeded per episode) or a "
    "module:callable policy (imported from the current folder first).",
)
@click.option("--seeds", help="Seeds to deal across routes: START:STOP or a comma list.")
@click.option("--episodes", type=click.IntRange(1), help="Episodes in all, split across routes.")
@click.option("--max-concurrency", type=click.IntRange(1), help="Routes running at once.")
@click.option(
    "--on-failure",
    type=click.Choice(["cancel-siblings", "isolate"]),
    default="cancel-siblings",
    show_default=True,
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    callback=check_report_path,
    help="Write the JSON report here (also on failure and Ctrl+C); its folder is checked "
    "before the run starts.",
)
@click.option("--close-env", is_flag=True, help="Send Close to each env at the end.")
@click.option("--timeouts", help="JSON limits, e.g. '{\"envStepTimeoutMs\": 5000}'.")
@click.option("--max-episode-steps", type=click.IntRange(1), help="Truncate episodes at N steps.")
@click.option(
    "--max-episode-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="Truncate episodes after S seconds.",
)
@click.option(
    "--trial-index-base",
    type=click.IntRange(0),
    help="First trial ordinal (default 0); routes get consecutive blocks, so every "
    "episode walks its own trial (reset option trial_index).",
)
@click.option("--no-progress", is_flag=True, help="Do not draw live progress bars.")
@click.option(
    "--batch-predicts/--no-batch-predicts",
    default=None,
    help="Default: routes sharing one in-process policy run as one fused block (one "
    "batched forward pass per round). --batch-predicts also groups the predicts of routes "
    "sharing a model server into one round trip; --no-batch-predicts turns batching off "
    "(one task and one-row predicts per route). See docs/guide/batching.md.",
)
@click.option(
    "--token", envvar="RLMESH_TRIO_TOKEN", help="Bearer token sent to every env and model server."
)
@client_tls_options
@backend_options
@durable_options
@results_options
@dashboard_options
def run_cmd(
    envs: tuple[str, ...],
    model: str,
    seeds: str | None,
    episodes: int | None,
    max_concurrency: int | None,
    on_failure: str,
    json_path: Path | None,
    close_env: bool,
    timeouts: str | None,
    max_episode_steps: int | None,
    max_episode_seconds: float | None,
    trial_index_base: int | None,
    no_progress: bool,
    batch_predicts: bool | None,
    token: str | None,
    tls_ca: Path | None,
    use_tls: bool,
    backend: str,
    ray_address: str | None,
    shards: int | None,
    results: ResultsOptions,
    **durable: Any,  # the durable options, and --dashboard/--dashboard-token
) -> None:
    """Evaluate MODEL on every --env at once: one route per env, seeds dealt round-robin;
    --backend processes|ray shards them. Exit status: 0 all completed, 1 any failed (the
    report is still written), 2 a usage mistake (checked before the run, or a spec every
    route refused before any episode), 130 on Ctrl+C (a partial report).
    """
    _check_run_options(seeds, episodes, backend, ray_address, shards, tls_ca is not None or use_tls)
    _check_durable_backend(backend, durable)
    try:
        routes = _routes(
            [results.resolve_env(e) for e in envs],
            results,
            model,
            seeds,
            episodes,
            limits=parse_limits(timeouts),
            close_env_on_end=close_env,
            max_episode_steps=max_episode_steps,
            max_episode_seconds=max_episode_seconds,
            dealing=durable["dealing"],
            **({} if trial_index_base is None else {"trial_index_base": trial_index_base}),
        )
        options = _run_options(on_failure, max_concurrency, batch_predicts, token, tls_ca, use_tls)
        options |= durable_kwargs(durable, local=backend == "local")
        if backend == "local":
            orchestrator = _local_orchestrator(routes, options)
    except click.UsageError as exc:
        fail(exc.format_message())
    except RlmeshTrioError as exc:
        fail(user_message(exc))
    if backend == "local":
        outcome = _run_local(orchestrator, json_path, not no_progress, results, durable)
    else:
        bars = not no_progress
        outcome = run_distributed_cli(routes, backend, ray_address, shards, bars, **options)
    _finish(*outcome, json_path, results)


def _local_orchestrator(routes: list[Any], options: dict[str, Any]) -> Orchestrator:
    """The run in this process (the orchestrator is imported now, not for ``--help``)."""
    from ..orchestrator._run import Orchestrator

    orchestrator = Orchestrator(routes, **options)
    _say_resumed(orchestrator.report().meta)
    return orchestrator


def _say_resumed(meta: Any) -> None:
    """``resuming LEDGER: 37 of 120 episodes done, 83 to go`` (on stderr, before the run)."""
    note = getattr(meta, "resumed", None)
    if note:
        click.echo(note, err=True)


def _run_options(
    on_failure: str,
    max_concurrency: int | None,
    batch_predicts: bool | None,
    token: str | None,
    tls_ca: Path | None,
    use_tls: bool,
) -> dict[str, Any]:
    """The orchestrator's keyword arguments, the same for a local and a sharded run."""
    return {
        "on_failure": "isolate" if on_failure == "isolate" else "cancel_siblings",
        "max_concurrency": max_concurrency,
        "batch_predicts": batch_predicts,
        "client_options": client_options(token, tls_ca, use_tls),
    }


def _check_run_options(
    seeds: str | None,
    episodes: int | None,
    backend: str,
    ray_address: str | None,
    shards: int | None,
    tls: bool,
) -> None:
    if seeds is not None and episodes is not None:
        fail("give --seeds or --episodes, not both")
    if seeds is None and episodes is None:
        fail("give --seeds START:STOP or --episodes N")
    mistake = check_backend_options(backend, ray_address, shards)
    if mistake is None and backend != "local" and tls:
        mistake = "--tls-ca/--tls do not travel to shards yet; use --backend local"
    if mistake is not None:
        fail(mistake)


def _run_local(
    orchestrator: Orchestrator,
    json_path: Path | None,
    progress: bool,
    results: ResultsOptions,
    more: dict[str, Any],
) -> tuple[RunReport, int, str]:
    """The run in this process, with progress bars and the dashboard when asked for; a
    second Ctrl+C during cleanup writes the partial report (``_abandon``)."""
    import trio

    orchestrator.on_second_interrupt = functools.partial(_abandon, json_path)
    address, token = more.get("dashboard"), more.get("dashboard_token")
    live = open_dashboard(address, token, orchestrator.routes, results.recording)
    outcome = trio.run(_run_with_progress, orchestrator, progress, live)
    close_dashboard(live, outcome[0], results.media)
    return outcome


def _check_durable_backend(backend: str, durable: dict[str, Any]) -> None:
    if backend == "local":
        return
    if durable.get("dashboard") is not None:
        fail("--dashboard goes with --backend local for now (watch a --ledger instead)")
    # --ledger, --resume, --retries and --dealing dynamic travel to shards (a ticket
    # pool runs whole in one shard: see distributed/_planner.py).


def _routes(
    envs: list[Any],
    results: ResultsOptions,
    model: str,
    seeds: str | None,
    episodes: int | None,
    **options: Any,
) -> list[Any]:
    """One route per --env with the seeds or episodes dealt, filmed as ``results`` asks;
    every env factory checked."""
    from ..orchestrator._route import shard

    routes = shard(
        envs=envs,
        model=resolve_model(model),
        seeds=parse_seeds(seeds) if seeds is not None else None,
        episodes=episodes,
        **options,
    )
    build_first_envs(routes)
    return results.apply(routes)


def _finish(
    report: RunReport, code: int, message: str, json_path: Path | None, results: ResultsOptions
) -> None:
    """Print the table (not for a usage mistake), write the outputs, say what failed, exit."""
    if code != EXIT_USAGE:
        print_summary(report)
    if not write_outputs(report, json_path, results):
        code = code or EXIT_FAILED
    if message:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _abandon(json_path: Path | None, report: RunReport) -> None:
    """A second Ctrl+C while the first one's cleanup runs: write the partial JSON report
    (quick), then die of SIGINT at once, leaving the cleanup (an env's close, say) undone.

    Dying of the signal (the shell shows exit status 130) is how a program tells its
    parent it was interrupted; an exit() would wait for the cleanup threads.
    """
    written = json_path is not None and write_report(report, json_path)
    where = f"; partial report written to {json_path}" if written else ""
    click.echo(f"\nerror: interrupted again: not waiting for cleanup{where}", err=True)
    if sys.stdout.isatty():
        sys.stdout.write("\x1b[?25h")  # the progress bars hid the cursor; no one else shows it
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


async def _run_with_progress(
    orchestrator: Any, progress: bool, dashboard: Any = None
) -> tuple[RunReport, int, str]:
    from ..hooks import RichProgress
    from ..orchestrator._run import RunInterrupted
    from ..report._report import RunFailed
    from ..runtime._hooks import HookChain

    bars = RichProgress(orchestrator.routes, transient=True) if progress else None
    watchers = [h for h in (bars, dashboard) if h is not None]
    orchestrator.hooks = (
        None if not watchers else watchers[0] if len(watchers) == 1 else HookChain(watchers)
    )
    try:
        if bars is not None:
            with bars:
                report = await orchestrator.run()
        else:
            report = await orchestrator.run()
    except RunFailed as exc:
        mistake = _plan_mismatch(exc.report) or spec_mistake(exc.report)
        if mistake is not None:
            return exc.report, EXIT_USAGE, mistake
        return exc.report, EXIT_FAILED, str(exc)
    except RunInterrupted as exc:
        return exc.report, EXIT_INTERRUPTED, "interrupted; partial report kept"
    except InvalidSpec as exc:  # the ledger could not be opened: nothing ran
        fail(user_message(exc))
    mistake = _plan_mismatch(report) or spec_mistake(report)
    if mistake is not None:
        return report, EXIT_USAGE, mistake
    failed = [o for o in report.routes if o.status != "completed"]
    if failed:
        return report, EXIT_FAILED, f"{len(failed)} route(s) failed; first: {failed[0].error}"
    return report, 0, ""


def _plan_mismatch(report: RunReport) -> str | None:
    """A resume that met another env than its ledger's: the user's mistake (exit 2)."""
    from ..orchestrator._plan import PlanMismatch

    for outcome in report.routes:
        if isinstance(outcome.error, PlanMismatch):
            return user_message(outcome.error)
    return None


def write_outputs(
    report: RunReport,
    json_path: Path | None,
    results: ResultsOptions,
    title: str = "rlmesh-trio run",
) -> bool:
    """The JSON report, then the bundle and HTML report, each when asked for; False when the
    JSON report could not be written (a one-line error was printed)."""
    written = json_path is None or write_report(report, json_path)
    try:
        for line in results.write(report, title):
            click.echo(line)
    except (RlmeshTrioError, OSError) as exc:
        fail(f"writing results: {exc}")
    for warning in results.warnings():
        click.echo(f"warning: {warning}", err=True)
    return written
