"""``rlmesh-trio``: demo, serve-env, serve-model, run, check.

User mistakes (a bad address, an unknown env id, malformed options) end as
one ``error: ...`` line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click
import trio

from .._errors import InvalidSpec, RlmeshTrioError
from ..orchestrator import Orchestrator, RunFailed, RunInterrupted, RunReport
from ._checks import (
    check_address_option,
    check_finite,
    check_report_path,
    spec_mistake,
    user_message,
)
from ._distributed import backend_options, check_backend_options, run_distributed_cli
from ._durable import durable_kwargs, durable_options
from ._summary import print_summary, write_report
from ._targets import (
    build_first_envs,
    make_env_factory,
    parse_limits,
    parse_seeds,
    resolve_env,
    resolve_model,
)
from ._tls import client_context, client_tls_options, server_context, server_tls_options

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="Log route events (-v) and debug detail (-vv).")
@click.version_option(package_name="rlmesh-trio")
def cli(verbose: int) -> None:
    """Evaluate RL models against many environments in parallel (rlmesh-wire-v1, on Trio)."""
    level = logging.ERROR if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


# -- demo ----------------------------------------------------------------------
@cli.command()
@click.option(
    "--routes",
    "n_routes",
    default=4,
    show_default=True,
    type=click.IntRange(1, 256),
    help="How many env servers (routes) to run in parallel.",
)
@click.option(
    "--episodes", default=5, show_default=True, type=click.IntRange(1), help="Episodes per route."
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    callback=check_report_path,
    help="Also write the JSON report here (its folder is checked before the demo starts).",
)
@click.option("--no-progress", is_flag=True, help="Do not draw live progress bars.")
def demo(n_routes: int, episodes: int, json_path: Path | None, no_progress: bool) -> None:
    """Run CartPole-v1 env servers and a built-in policy server on loopback, then evaluate.

    Everything runs in this process over real gRPC on 127.0.0.1: one env
    server per route and one shared model server.
    """
    from ._demo import run_demo

    report = trio.run(run_demo, n_routes, episodes, not no_progress)
    print_summary(report, title="rlmesh-trio demo: CartPole-v1 over loopback gRPC")
    written = json_path is None or write_report(report, json_path)
    sys.exit(0 if report.ok and written else EXIT_FAILED)


# -- serve-env -----------------------------------------------------------------
@cli.command("serve-env")
@click.argument("env")
@click.option(
    "--address",
    default="127.0.0.1:0",
    show_default=True,
    callback=check_address_option,
    help="Where to listen (host:port, tcp://host:port, unix:///path).",
)
@click.option("--num-envs", type=click.IntRange(1), help="Serve a gymnasium vector env of N envs.")
@click.option("--lanes", type=click.IntRange(1), help="Serve N copies as independent lanes.")
@click.option("--ready-fd", type=int, help="Write the bound address as one line to this fd.")
@click.option("--allow-remote-shutdown", is_flag=True, help="Honour the Shutdown RPC.")
@click.option("--token", envvar="RLMESH_TRIO_TOKEN", help="Require this bearer token.")
@server_tls_options
@click.option(
    "--env-thread",
    type=click.Choice(["auto", "loop", "worker", "caller"]),
    default="auto",
    show_default=True,
    help="Where env calls run: 'loop' inline on the serving loop (fastest; health and "
    "Shutdown wait while a step runs), 'worker' on worker threads (lanes run in "
    "parallel), 'caller' on this thread; 'auto' picks loop for one-at-a-time envs, "
    "worker for lanes.",
)
def serve_env_cmd(
    env: str,
    address: str,
    num_envs: int | None,
    lanes: int | None,
    ready_fd: int | None,
    allow_remote_shutdown: bool,
    token: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    env_thread: str,
) -> None:
    """Serve ENV (a gymnasium id, or module:factory imported from the current folder first)
    until Ctrl+C."""
    from ..transport import EnvServer

    if num_envs and lanes:
        _fail("--num-envs and --lanes are mutually exclusive")
    factory = make_env_factory(env)
    try:
        if num_envs:
            import gymnasium

            target: Any = (
                gymnasium.make_vec(env, num_envs=num_envs, vectorization_mode="sync")
                if ":" not in env
                else gymnasium.vector.SyncVectorEnv([factory] * num_envs)
            )
        elif lanes:
            target = [factory() for _ in range(lanes)]
        else:
            target = factory()
    except click.UsageError:
        raise  # already one line: "factory mod:fn returned dict, not a gymnasium Env"
    except Exception as exc:
        _fail(f"could not build env {env!r}: {type(exc).__name__}: {exc}")
    tls = _server_tls(tls_cert, tls_key)
    server = EnvServer(
        target, address, allow_remote_shutdown=allow_remote_shutdown, token=token, ssl=tls
    )
    _serve(server, ready_fd, env_thread=env_thread)


# -- serve-model ---------------------------------------------------------------
@cli.command("serve-model")
@click.argument("policy")
@click.option(
    "--address",
    default="127.0.0.1:0",
    show_default=True,
    callback=check_address_option,
    help="Where to listen (host:port, tcp://host:port, unix:///path).",
)
@click.option("--ready-fd", type=int, help="Write the bound address as one line to this fd.")
@click.option("--allow-remote-shutdown", is_flag=True, help="Honour the Shutdown RPC.")
@click.option("--token", envvar="RLMESH_TRIO_TOKEN", help="Require this bearer token.")
@server_tls_options
def serve_model_cmd(
    policy: str,
    address: str,
    ready_fd: int | None,
    allow_remote_shutdown: bool,
    token: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    """Serve POLICY until Ctrl+C: module:callable, or an object with predict (and optionally
    predict_batch, predict_chunk)."""
    from ..transport import ModelServer
    from ._targets import load_policy

    tls = _server_tls(tls_cert, tls_key)
    target = load_policy(policy, "policy")
    server = ModelServer(
        target, address, allow_remote_shutdown=allow_remote_shutdown, token=token, ssl=tls
    )
    _serve(server, ready_fd)


def _serve(server: Any, ready_fd: int | None, **options: Any) -> None:
    try:
        server.serve(ready_fd=ready_fd, **options)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        _fail(f"cannot serve: {exc}")
    except RlmeshTrioError as exc:
        _fail(user_message(exc))


# -- run -----------------------------------------------------------------------
@cli.command("run")
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
    default=0,
    show_default=True,
    help="First trial ordinal; routes get consecutive blocks (reset option trial_index).",
)
@click.option("--no-progress", is_flag=True, help="Do not draw live progress bars.")
@click.option(
    "--batch-predicts",
    is_flag=True,
    help="Group predicts of routes sharing a model server into one round trip.",
)
@click.option(
    "--token", envvar="RLMESH_TRIO_TOKEN", help="Bearer token sent to every env and model server."
)
@client_tls_options
@backend_options
@durable_options
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
    trial_index_base: int,
    no_progress: bool,
    batch_predicts: bool,
    token: str | None,
    tls_ca: Path | None,
    use_tls: bool,
    backend: str,
    ray_address: str | None,
    shards: int | None,
    **durable: Any,
) -> None:
    """Evaluate MODEL on every --env at once: one route per env, seeds dealt round-robin.

    --backend processes|ray shards the routes (README: "Beyond one machine").

    Exit status: 0 when every route completed, 1 when any failed (the report is
    still written), 2 for a usage mistake (checked before the run, or a spec
    every route refused before any episode), 130 on Ctrl+C (a partial report).
    """
    _check_run_options(seeds, episodes, backend, ray_address, shards, tls_ca is not None or use_tls)
    _check_durable_backend(backend, durable)
    try:
        routes = _routes(
            envs,
            model,
            seeds,
            episodes,
            limits=parse_limits(timeouts),
            close_env_on_end=close_env,
            max_episode_steps=max_episode_steps,
            max_episode_seconds=max_episode_seconds,
            trial_index_base=trial_index_base,
            dealing=durable["dealing"],
        )
        options = _run_options(on_failure, max_concurrency, batch_predicts, token, tls_ca, use_tls)
        if backend != "local":
            where: dict[str, Any] = {
                "backend": backend,
                "ray_address": ray_address,
                "shards": shards,
            }
            _finish(
                *run_distributed_cli(routes, progress=not no_progress, **where, **options),
                json_path,
            )
        orchestrator = Orchestrator(routes, **options, **durable_kwargs(durable))
    except click.UsageError as exc:
        _fail(exc.format_message())
    except RlmeshTrioError as exc:
        _fail(user_message(exc))
    _finish(*trio.run(_run_with_progress, orchestrator, not no_progress), json_path)


def _run_options(
    on_failure: str,
    max_concurrency: int | None,
    batch_predicts: bool,
    token: str | None,
    tls_ca: Path | None,
    use_tls: bool,
) -> dict[str, Any]:
    """The orchestrator's keyword arguments, the same for a local and a sharded run."""
    return {
        "on_failure": "isolate" if on_failure == "isolate" else "cancel_siblings",
        "max_concurrency": max_concurrency,
        "batch_predicts": batch_predicts,
        "client_options": _client_options(token, tls_ca, use_tls),
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
        _fail("give --seeds or --episodes, not both")
    if seeds is None and episodes is None:
        _fail("give --seeds START:STOP or --episodes N")
    mistake = check_backend_options(backend, ray_address, shards)
    if mistake is None and backend != "local" and tls:
        mistake = "--tls-ca/--tls do not travel to shards yet; use --backend local"
    if mistake is not None:
        _fail(mistake)


def _check_durable_backend(backend: str, durable: dict[str, Any]) -> None:
    if backend == "local":
        return
    used = [
        flag
        for flag, on in (
            ("--ledger", durable.get("ledger") is not None),
            ("--resume", bool(durable.get("resume"))),
            ("--retries", bool(durable.get("retries"))),
            ("--dealing dynamic", durable.get("dealing") == "dynamic"),
        )
        if on
    ]
    if used:
        _fail(f"{', '.join(used)} go with --backend local for now (shards replay lost work)")


def _routes(
    envs: tuple[str, ...], model: str, seeds: str | None, episodes: int | None, **options: Any
) -> list[Any]:
    """One route per --env with the seeds or episodes dealt; every env factory checked."""
    from ..orchestrator import shard

    routes = shard(
        envs=[resolve_env(e) for e in envs],
        model=resolve_model(model),
        seeds=parse_seeds(seeds) if seeds is not None else None,
        episodes=episodes,
        **options,
    )
    build_first_envs(routes)
    return routes


def _finish(report: RunReport, code: int, message: str, json_path: Path | None) -> None:
    """Print the table (not for a usage mistake), write the report, say what failed, exit."""
    if code != EXIT_USAGE:
        print_summary(report)
    if json_path is not None and not write_report(report, json_path):
        code = code or EXIT_FAILED
    if message:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


async def _run_with_progress(orchestrator: Any, progress: bool) -> tuple[RunReport, int, str]:
    from ..hooks import RichProgress

    bars = RichProgress(orchestrator.routes, transient=True) if progress else None
    orchestrator.hooks = bars
    try:
        if bars is not None:
            with bars:
                report = await orchestrator.run()
        else:
            report = await orchestrator.run()
    except RunFailed as exc:
        mistake = spec_mistake(exc.report)
        if mistake is not None:
            return exc.report, EXIT_USAGE, mistake
        return exc.report, EXIT_FAILED, str(exc)
    except RunInterrupted as exc:
        return exc.report, EXIT_INTERRUPTED, "interrupted; partial report kept"
    except InvalidSpec as exc:  # the ledger could not be opened: nothing ran
        _fail(user_message(exc))
    mistake = spec_mistake(report)
    if mistake is not None:
        return report, EXIT_USAGE, mistake
    failed = [o for o in report.routes if o.status != "completed"]
    if failed:
        return report, EXIT_FAILED, f"{len(failed)} route(s) failed; first: {failed[0].error}"
    return report, 0, ""


# -- check ---------------------------------------------------------------------
@cli.command()
@click.argument("address", callback=check_address_option)
@click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    callback=check_finite,
    help="Seconds to wait for the peer (> 0).",
)
@click.option("--model", "is_model", is_flag=True, help="The address is a model server.")
@click.option("--token", envvar="RLMESH_TRIO_TOKEN", help="Bearer token to send.")
@client_tls_options
def check(
    address: str,
    timeout: float,
    is_model: bool,
    token: str | None,
    tls_ca: Path | None,
    use_tls: bool,
) -> None:
    """Handshake with ADDRESS (and ask its health), then print what it serves."""
    from ._check import run_check

    tls = _client_tls(tls_ca, use_tls)
    try:
        lines = trio.run(run_check, address, timeout, is_model, token, tls)
    except RlmeshTrioError as exc:
        _fail(str(exc), EXIT_FAILED)
    for line in lines:
        click.echo(line)


def _server_tls(cert: Path | None, key: Path | None) -> Any:
    try:
        return server_context(cert, key)
    except click.BadParameter as exc:
        _fail(exc.format_message())


def _client_tls(ca: Path | None, use_tls: bool) -> Any:
    try:
        return client_context(ca, use_tls)
    except click.BadParameter as exc:
        _fail(exc.format_message())


def _client_options(token: str | None, ca: Path | None, use_tls: bool) -> dict[str, Any] | None:
    """What every client of the run gets: the bearer token and the TLS context, if any."""
    options: dict[str, Any] = {}
    if token:
        options["token"] = token
    tls = client_context(ca, use_tls)
    if tls is not None:
        options["ssl"] = tls
    return options or None


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except InvalidSpec as exc:  # a spec checked late is still the user's mistake
        _fail(exc.detail)
    except RlmeshTrioError as exc:
        _fail(str(exc), EXIT_FAILED)
