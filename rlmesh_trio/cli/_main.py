"""``rlmesh-trio``: demo, serve-env, serve-model, run, check, report, compare, watch.

User mistakes (a bad address, an unknown env id, malformed options) end as
one ``error: ...`` line and a non-zero exit, never a traceback.

Each command imports what it runs when it runs: ``--help`` loads click and the
option definitions, not Trio, the runtime, the servers or rich.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from .._errors import InvalidSpec, RlmeshTrioError
from ._checks import check_address_option, check_finite, check_report_path, user_message
from ._common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    client_tls,
    fail,
    server_tls,
    stack_options,
)
from ._compare import compare_cmd
from ._dashboard import close_dashboard, dashboard_options, open_dashboard, watch_cmd
from ._limits import limit_option, server_limits
from ._report import report_cmd
from ._results import ResultsOptions, need_extra, results_options
from ._run_cmd import run_cmd, write_outputs
from ._summary import print_summary
from ._targets import make_env_factory
from ._tls import client_tls_options, server_tls_options


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
@results_options
@dashboard_options
def demo(
    n_routes: int,
    episodes: int,
    json_path: Path | None,
    no_progress: bool,
    results: ResultsOptions,
    dashboard: str | None,
    dashboard_token: str | None,
) -> None:
    """Run CartPole-v1 env servers and a built-in policy server on loopback, then evaluate.

    Everything runs in this process over real gRPC on 127.0.0.1: one env
    server per route and one shared model server.
    """
    import trio

    from ._demo import run_demo

    if results.recording is not None:
        need_extra(
            "pygame", extra="render", purpose="--record of the demo (CartPole draws with pygame)"
        )
    title = "rlmesh-trio demo: CartPole-v1"
    live = open_dashboard(dashboard, dashboard_token, recording=results.recording, title=title)
    report = trio.run(run_demo, n_routes, episodes, not no_progress, results, live)
    close_dashboard(live, report, results.media)
    print_summary(report, title="rlmesh-trio demo: CartPole-v1 over loopback gRPC")
    written = write_outputs(report, json_path, results, "rlmesh-trio demo: CartPole-v1")
    sys.exit(0 if report.ok and written else EXIT_FAILED)


# What serve-env and serve-model share: where to listen (first), how to announce, who may call.
listen_option = click.option(
    "--address",
    default="127.0.0.1:0",
    show_default=True,
    callback=check_address_option,
    help="Where to listen (host:port, tcp://host:port, unix:///path).",
)
serving_options = stack_options(
    click.option("--ready-fd", type=int, help="Write the bound address as one line to this fd."),
    click.option("--allow-remote-shutdown", is_flag=True, help="Honour the Shutdown RPC."),
    click.option("--token", envvar="RLMESH_TRIO_TOKEN", help="Require this bearer token."),
    server_tls_options,
    limit_option,
)


# -- serve-env -----------------------------------------------------------------
@cli.command("serve-env")
@click.argument("env")
@listen_option
@click.option("--num-envs", type=click.IntRange(1), help="Serve a gymnasium vector env of N envs.")
@click.option(
    "--lanes",
    type=click.IntRange(1),
    help="Serve N copies as independent lanes (a client may step several in one request).",
)
@serving_options
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
    limits: tuple[str, ...],
    env_thread: str,
) -> None:
    """Serve ENV (a gymnasium id, or module:factory imported from the current folder first)
    until Ctrl+C; prints "serving ENV on ADDRESS" to stderr once bound."""
    from ..transport.server._env_server import EnvServer

    if num_envs and lanes:
        fail("--num-envs and --lanes are mutually exclusive")
    chosen = server_limits(limits)
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
        fail(f"could not build env {env!r}: {type(exc).__name__}: {exc}")
    tls = server_tls(tls_cert, tls_key)
    server = EnvServer(
        target,
        address,
        allow_remote_shutdown=allow_remote_shutdown,
        token=token,
        ssl=tls,
        limits=chosen,
    )
    _serve(server, ready_fd, env_thread=env_thread, announce_as=env)


# -- serve-model ---------------------------------------------------------------
@cli.command("serve-model")
@click.argument("policy")
@listen_option
@serving_options
def serve_model_cmd(
    policy: str,
    address: str,
    ready_fd: int | None,
    allow_remote_shutdown: bool,
    token: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    limits: tuple[str, ...],
) -> None:
    """Serve POLICY until Ctrl+C: module:callable, or an object with predict (and optionally
    predict_batch, predict_chunk); prints "serving POLICY on ADDRESS" to stderr once bound."""
    from ..transport.server._model_server import ModelServer
    from ._targets import load_policy

    tls = server_tls(tls_cert, tls_key)
    chosen = server_limits(limits)
    target = load_policy(policy, "policy")
    server = ModelServer(
        target,
        address,
        allow_remote_shutdown=allow_remote_shutdown,
        token=token,
        ssl=tls,
        limits=chosen,
    )
    _serve(server, ready_fd, announce_as=policy)


def _serve(server: Any, ready_fd: int | None, **options: Any) -> None:
    try:
        server.serve(ready_fd=ready_fd, **options)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        fail(f"cannot serve: {exc}")
    except RlmeshTrioError as exc:
        fail(user_message(exc))


cli.add_command(run_cmd)
cli.add_command(report_cmd)
cli.add_command(compare_cmd)
cli.add_command(watch_cmd)


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
    """Handshake with ADDRESS (and ask its health, on the same connection), then print what
    it serves.

    A peer that answers but speaks no HTTP/2 (a plain web server, say) is
    reported as "not a gRPC/HTTP2 endpoint".
    """
    import trio

    from ._check import run_check

    tls = client_tls(tls_ca, use_tls)
    try:
        lines = trio.run(run_check, address, timeout, is_model, token, tls)
    except RlmeshTrioError as exc:
        fail(str(exc), EXIT_FAILED)
    for line in lines:
        click.echo(line)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except InvalidSpec as exc:  # a spec checked late is still the user's mistake
        fail(exc.detail)
    except RlmeshTrioError as exc:
        fail(str(exc), EXIT_FAILED)
