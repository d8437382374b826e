"""Where a served route step's client CPU goes: the socket floor, the transport, the runtime.

Three loops, each measured in this process as user + sys CPU microseconds per
step (one env step and one predict), alternated in one run:

* ``floor`` -- the I/O a step cannot avoid on Trio: two round trips of a
  small message (``os.write``, ``trio.lowlevel.wait_readable``, ``os.read``)
  to an echo process;
* ``transport`` -- :class:`~rlmesh_trio.RemoteEnv` and
  :class:`~rlmesh_trio.RemoteModel` alone against rlmesh 0.1.0's CartPole
  env server and model server: predict, step, reset at an episode's end,
  with none of the runtime (no timeouts, telemetry, records, hooks);
* ``runtime`` -- ``rt.run_routes`` over the same servers (case 5 of
  ``compare_rlmesh.py``).

``transport - floor`` is the transport's own Python (HTTP/2, gRPC framing,
codecs, demultiplexing); ``runtime - transport`` is the driver's::

    python benchmarks/client_floor.py [--steps 10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")

import _servers

import rlmesh_trio as rt
from rlmesh_trio._protocol import env_pb, model_pb

_MESSAGE = b"x" * 120


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _echo(ready: multiprocessing.Queue[int]) -> None:  # type: ignore[type-arg]
    listener = socket.create_server(("127.0.0.1", 0))
    ready.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(65536):
        conn.sendall(data)


async def _floor(port: int, steps: int) -> float:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = stream.socket.fileno()
    started = _cpu()
    for _ in range(2 * steps):
        os.write(fd, _MESSAGE)
        await trio.lowlevel.wait_readable(fd)
        os.read(fd, 65536)
    spent = _cpu() - started
    await stream.aclose()
    return spent / steps * 1e6


async def _open(env_address: str, model_address: str) -> tuple[rt.RemoteEnv, rt.RemoteModel]:
    env, model = rt.RemoteEnv(env_address), rt.RemoteModel(model_address)
    info = await env.connect()
    await model.connect()
    edition = info.preferred_edition or info.editions[0]
    await env.configure(edition)
    assert info.contract is not None
    context = model_pb.AdapterContext(session_id="floor", env_id="env-0", request_id="resolve")
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=context, env_spec=info.contract.spec, selected_workflow_edition=edition
        )
    )
    return env, model


async def _transport(env_address: str, model_address: str, steps: int) -> float:
    env, model = await _open(env_address, model_address)
    episode = 0
    reset = await env.reset(env_pb.ResetRequest(seeds=[0], episode_ids=["ep-0"]))
    observation = reset.response.observation
    started = _cpu()
    for step in range(steps):
        context = model_pb.AdapterContext(
            session_id="floor", env_id="env-0", request_id=f"env-0:step:{step}"
        )
        info = model_pb.EpisodeInfo(episode_id=f"ep-{episode}", seed=episode)
        predicted = await model.predict(
            model_pb.PredictRequest(context=context, observation=observation, episode_info=[info])
        )
        stepped = await env.step(
            env_pb.StepRequest(
                action=predicted.response.actions[0],
                timeout_ms=30_000,
                episode_ids=[f"ep-{episode}"],
            )
        )
        response = stepped.response
        observation = response.observation
        if response.terminated_mask != b"\x00" or response.truncated_mask != b"\x00":
            episode += 1
            reset = await env.reset(
                env_pb.ResetRequest(seeds=[episode], episode_ids=[f"ep-{episode}"])
            )
            observation = reset.response.observation
    spent = _cpu() - started
    await env.aclose()
    await model.aclose()
    return spent / steps * 1e6


def _runtime(env_address: str, model_address: str, episodes: int) -> Callable[[], float]:
    routes = [rt.Route(env=env_address, model=model_address, seeds=list(range(episodes)))]

    def run() -> float:
        started = _cpu()
        report = rt.run(routes)
        return (_cpu() - started) / report.total_steps * 1e6

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="steps per measured loop")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each loop")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    ready: multiprocessing.Queue[int] = multiprocessing.Queue()  # type: ignore[type-arg]
    echo = multiprocessing.Process(target=_echo, args=(ready,), daemon=True)
    echo.start()
    port = ready.get(timeout=30)
    samples: dict[str, list[float]] = {"floor": [], "transport": [], "runtime": []}
    with _servers.rlmesh_env() as env, _servers.rlmesh_model() as model:
        runtime = _runtime(env.address, model.address, max(1, args.steps // 500))
        runtime()  # warm: imports, first connections
        for _ in range(args.rounds):
            if not samples["floor"]:  # the echo serves one connection
                samples["floor"].append(trio.run(_floor, port, args.steps))
            samples["transport"].append(
                trio.run(_transport, env.address, model.address, args.steps)
            )
            samples["runtime"].append(runtime())
    echo.terminate()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print("client CPU per step (user + sys, us), medians:")
    for name, value in medians.items():
        print(f"  {name:<10} {value:7.1f}")
    print(f"  transport - floor   {medians['transport'] - medians['floor']:7.1f}")
    print(f"  runtime - transport {medians['runtime'] - medians['transport']:7.1f}")


if __name__ == "__main__":
    main()
