"""Drive rlmesh 0.1.0 servers with rlmesh-trio's orchestrator.

Starts CartPole-v1 env servers with rlmesh's own command line
(``python -m rlmesh._cli.serve_env --ready-fd N``) and one rlmesh model server
(``rlmesh.numpy.Model(act).serve(...)``) as subprocesses on this machine, runs
one route per env server against them with ``rt.run``, prints a summary and
round-trip latencies per operation, and stops the servers.

Needs the ``interop`` extra (``pip install ".[interop]"``, i.e. ``rlmesh==0.1.0``)::

    python examples/drive_rlmesh_servers.py
    python examples/drive_rlmesh_servers.py --envs 2 --episodes 4 --max-steps 100

The rlmesh model server cannot report a port it picked itself, so it listens
on a unix socket in a temporary folder; the env servers bind 127.0.0.1 port 0
and write their address to a pipe (``--ready-fd``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import numpy as np

import rlmesh_trio as rt

EDITION = "2026.06"  # pin rlmesh's workflow edition (it warns when left unpinned)
STARTUP_TIMEOUT = 30.0


def act(obs: np.ndarray) -> int:
    """The policy the rlmesh model server runs: push toward the pole's lean."""
    return 1 if obs[2] + 0.5 * obs[3] > 0 else 0


@contextlib.contextmanager
def running(argv: list[str], **popen: object) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process for the duration of the block; terminate (then kill) it after."""
    proc = subprocess.Popen(argv, **popen)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_env_server(stack: contextlib.ExitStack, env_id: str) -> str:
    """``python -m rlmesh._cli.serve_env`` on 127.0.0.1:0; returns the address it reports."""
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "rlmesh._cli.serve_env", "--env", env_id]
    argv += ["--address", "127.0.0.1:0", "--ready-fd", str(write_fd)]
    argv += ["--workflow-edition", EDITION]
    # stdout: rlmesh's banner ("Waiting for client connection..."), not needed here.
    proc = stack.enter_context(running(argv, pass_fds=(write_fd,), stdout=subprocess.DEVNULL))
    os.close(write_fd)  # the child holds the write end now
    with os.fdopen(read_fd) as ready:
        # One line, written once the server accepts connections; EOF if it died first.
        if not select.select([ready], [], [], STARTUP_TIMEOUT)[0]:
            raise RuntimeError(f"rlmesh env server not ready after {STARTUP_TIMEOUT} s")
        address = ready.readline().strip()
    if not address:
        raise RuntimeError(f"rlmesh env server exited with status {proc.wait()}")
    return address


def start_model_server(stack: contextlib.ExitStack, folder: str) -> str:
    """This script in ``--serve-model`` mode on a unix socket; returns its address."""
    path = os.path.join(folder, "model.sock")
    proc = stack.enter_context(running([sys.executable, __file__, "--serve-model", path]))
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:  # ready once the socket accepts a connection
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(path)
                return f"unix://{path}"
            except OSError:
                pass
        if proc.poll() is not None:
            raise RuntimeError(f"rlmesh model server exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"rlmesh model server not ready after {STARTUP_TIMEOUT} s")
        time.sleep(0.05)


def serve_model(path: str) -> None:
    """Child process: serve ``act`` with rlmesh until terminated."""
    import rlmesh
    import rlmesh.numpy

    options = rlmesh.ServeOptions(workflow_edition=EDITION)
    rlmesh.numpy.Model(act).serve(f"unix://{path}", options=options)


def main(num_envs: int, episodes: int, max_steps: int | None) -> rt.RunReport:
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        model = start_model_server(stack, folder)
        envs = [start_env_server(stack, "CartPole-v1") for _ in range(num_envs)]
        print(f"rlmesh servers up: model {model}, envs {', '.join(envs)}")

        routes = rt.shard(envs, model=model, seeds=range(episodes), max_episode_steps=max_steps)
        report = rt.run(routes)  # blocking; `await rt.run_routes(routes)` inside Trio

    for outcome in report:
        print(
            f"{outcome.route_id}: {outcome.status}, {outcome.total_episodes} episodes, "
            f"{outcome.total_steps} steps, seeds {[ep.seed for ep in outcome.episodes]}, "
            f"rewards {[ep.reward for ep in outcome.episodes]}"
        )
    print(
        f"total: {len(report.routes)} routes, {report.total_episodes} episodes, "
        f"{report.total_steps} steps, mean reward {report.mean_reward:.1f}, "
        f"{report.steps_per_s:.0f} steps/s"
    )
    for row in report.telemetry:  # round trips as the runtime saw them
        if row.metric == "rpc.total":
            print(
                f"  {row.op:<20} p50 {row.p50:6.3f} ms  p95 {row.p95:6.3f} ms  ({row.count} calls)"
            )
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-model"]:
        serve_model(sys.argv[2])
        sys.exit(0)
    if importlib.util.find_spec("rlmesh") is None:
        sys.exit('this example needs rlmesh 0.1.0: pip install ".[interop]"')
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4, help="rlmesh env servers, one route each")
    parser.add_argument("--episodes", type=int, default=8, help="episodes over all routes")
    parser.add_argument("--max-steps", type=int, default=None, help="truncate episodes")
    args = parser.parse_args()
    main(args.envs, args.episodes, args.max_steps)
