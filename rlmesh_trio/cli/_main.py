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

from .._errors import RlmeshTrioError, RunFailed
from ..orchestrator import RunInterrupted, RunReport
from ._summary import print_summary, write_report
from ._targets import make_env_factory, parse_limits, parse_seeds, resolve_env, resolve_model
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report here.",
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
    if json_path is not None:
        write_report(report, json_path)
    sys.exit(0 if report.ok else EXIT_FAILED)


# -- serve-env -----------------------------------------------------------------
@cli.command("serve-env")
@click.argument("env")
@click.option(
    "--address",
    default="127.0.0.1:0",
    show_default=True,
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
    """Serve ENV (a gymnasium id or module:factory) until Ctrl+C."""
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
    from ._targets import load_object

    tls = _server_tls(tls_cert, tls_key)
    target = load_object(policy, "policy")
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
        _fail(str(exc))


# -- run -----------------------------------------------------------------------
@cli.command("run")
@click.option(
    "--env",
    "envs",
    multiple=True,
    required=True,
    help="An env endpoint (address, gymnasium id or module:factory); repeat for more routes.",
)
@click.option("--model", required=True, help="A model address or module:callable policy.")
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
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the JSON report here (also on failure and Ctrl+C).",
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
) -> None:
    """Evaluate MODEL on every --env at once: one route per env, seeds dealt round-robin.

    Exit status: 0 when every route completed, 1 when any failed (the report is
    still written), 130 on Ctrl+C (a partial report is written).
    """
    from ..orchestrator import Orchestrator, shard

    if seeds is not None and episodes is not None:
        _fail("give --seeds or --episodes, not both")
    if seeds is None and episodes is None:
        _fail("give --seeds START:STOP or --episodes N")
    try:
        routes = shard(
            envs=[resolve_env(e) for e in envs],
            model=resolve_model(model),
            seeds=parse_seeds(seeds) if seeds is not None else None,
            episodes=episodes,
            limits=parse_limits(timeouts),
            close_env_on_end=close_env,
            max_episode_steps=max_episode_steps,
            max_episode_seconds=max_episode_seconds,
            trial_index_base=trial_index_base,
        )
        orchestrator = Orchestrator(
            routes,
            on_failure="isolate" if on_failure == "isolate" else "cancel_siblings",
            max_concurrency=max_concurrency,
            batch_predicts=batch_predicts,
            client_options=_client_options(token, tls_ca, use_tls),
        )
    except click.BadParameter as exc:
        _fail(exc.format_message())
    except RlmeshTrioError as exc:
        _fail(str(exc))
    report, code, message = trio.run(_run_with_progress, orchestrator, not no_progress)
    print_summary(report)
    if json_path is not None:
        write_report(report, json_path)
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
        return exc.report, EXIT_FAILED, str(exc)
    except RunInterrupted as exc:
        return exc.report, EXIT_INTERRUPTED, "interrupted; partial report kept"
    failed = [o for o in report.routes if o.status != "completed"]
    if failed:
        return report, EXIT_FAILED, f"{len(failed)} route(s) failed; first: {failed[0].error}"
    return report, 0, ""


# -- check ---------------------------------------------------------------------
@cli.command()
@click.argument("address")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for the peer.")
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
    """Handshake with ADDRESS (and ask its health), then print what it serves.

    A peer that answers but speaks no HTTP/2 (a plain web server, say) is
    reported as "not a gRPC/HTTP2 endpoint".
    """
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
    except RlmeshTrioError as exc:
        _fail(str(exc), EXIT_FAILED)
