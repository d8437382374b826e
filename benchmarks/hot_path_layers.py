"""One predict round trip to an rlmesh 0.1.0 model server, layer by layer (issue 7 item 3).

Same server process, same request, four clients; each row adds one layer,
so the differences say what each layer costs (client CPU per round trip,
``time.process_time`` of this process, and wall time)::

    L0  plain asyncio + grpclib, pre-encoded bytes, no parsing (a child process
        that never imports trio_asyncio: once imported, asyncio.run runs on
        trio-asyncio's loop)
    L1  the same client code on trio-asyncio's loop, inside trio.run
    L2  our JoinSession from Trio (bridge: asyncio queue out, Slot back) + parse
    L3  RemoteModel.predict (envelope encode, ids, checks, reply telemetry)

    python benchmarks/hot_path_layers.py [--n 3000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import grpclib.client  # noqa: E402
import grpclib.const  # noqa: E402
import gymnasium as gym  # noqa: E402
import trio  # noqa: E402
import trio_asyncio  # noqa: E402

from rlmesh_trio import spaces  # noqa: E402
from rlmesh_trio._wire import WORKFLOW_EDITION, core_pb, model_pb, spaces_pb  # noqa: E402
from rlmesh_trio.transport import RemoteModel, asyncio_loop  # noqa: E402
from rlmesh_trio.transport._channel import RawCodec  # noqa: E402
from rlmesh_trio.transport._join import JoinSession  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402

_JOIN = "/rlmesh.model.v1.ModelService/Join"
ENV_ID = "bench-env"


def _requests() -> tuple[model_pb.ResolveAdapterRequest, model_pb.PredictRequest]:
    g = gym.make("CartPole-v1")
    spec = core_pb.EnvSpec(
        action_space=spaces.from_gymnasium(g.action_space),
        observation_space=spaces.from_gymnasium(g.observation_space),
    )
    ctx = model_pb.AdapterContext(session_id="s", env_id=ENV_ID, request_id="bench:resolve")
    resolve = model_pb.ResolveAdapterRequest(
        context=ctx, env_spec=spec, selected_workflow_edition=WORKFLOW_EDITION, execution_horizon=1
    )
    predict = model_pb.PredictRequest(
        context=model_pb.AdapterContext(
            session_id="s", env_id=ENV_ID, request_id=f"{ENV_ID}:step_observation:000123"
        ),
        observation=spaces_pb.SpaceValue(leaves=[struct.pack("<4f", 0.01, 0.2, 0.03, -0.1)]),
        episode_info=[
            model_pb.EpisodeInfo(episode_id="0196f3c2-7f43-7a1e-9a3b-1c2d3e4f5a6b", seed=3)
        ],
    )
    return resolve, predict


def _envelopes() -> tuple[bytes, bytes]:
    resolve, predict = _requests()
    return (
        bytes(model_pb.JoinRequest(request_id="r0", resolve_adapter=resolve)),
        bytes(model_pb.JoinRequest(request_id="p", predict=predict)),
    )


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    return host, int(port)


Sample = tuple[float, float]  # (wall us, cpu us) per round trip


async def _timed_async(n: int, one: Callable[[], Awaitable[Any]]) -> Sample:
    for _ in range(50):
        await one()
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        await one()
    return (time.perf_counter() - w0) / n * 1e6, (time.process_time() - c0) / n * 1e6


async def _raw_asyncio(address: str, n: int) -> Sample:
    resolve, predict = _envelopes()
    host, port = _host_port(address)
    channel = grpclib.client.Channel(host, port, codec=RawCodec())
    try:
        stream = channel.request(_JOIN, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes)
        async with stream:
            await stream.send_request()
            await stream.send_message(resolve)
            await stream.recv_message()

            async def one() -> None:
                await stream.send_message(predict)
                await stream.recv_message()

            sample = await _timed_async(n, one)
            await stream.end()
            while await stream.recv_message() is not None:
                pass
        return sample
    finally:
        channel.close()


def _identity(data: bytes) -> bytes:
    return data


async def _session_from_trio(address: str, n: int, parse: Callable[[bytes], Any]) -> Sample:
    resolve, predict = _envelopes()
    host, port = _host_port(address)
    async with asyncio_loop():
        channel = await trio_asyncio.aio_as_trio(_make_channel)(host, port)
        session: JoinSession[Any] = JoinSession(
            channel, _JOIN, parse, lambda _r: "p", metadata=None
        )
        session.start()
        await session.request("p", resolve, kill_on_cancel=False)

        async def one() -> None:
            await session.request("p", predict, kill_on_cancel=False)

        sample = await _timed_async(n, one)
        session.kill()
        await session.wait_finished()
        channel.close()
        return sample


async def _make_channel(host: str, port: int) -> grpclib.client.Channel:
    return grpclib.client.Channel(host, port, codec=RawCodec())


async def _remote_model(address: str, n: int) -> Sample:
    resolve, predict = _requests()
    async with RemoteModel(address) as model:
        await model.connect()
        await model.resolve_adapter(resolve)

        async def one() -> None:
            await model.predict(predict)

        return await _timed_async(n, one)


def _plain_asyncio(address: str, n: int) -> Sample:
    resolve, predict = _envelopes()
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_raw_grpclib.py")
    out = subprocess.run(
        [sys.executable, child, address, str(n), resolve.hex(), predict.hex()],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout.split()
    return float(out[0]), float(out[1])


def _median(samples: list[Sample]) -> Sample:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="round trips per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.n

    async def l1(address: str) -> Sample:
        async with trio_asyncio.open_loop():
            return await trio_asyncio.aio_as_trio(_raw_asyncio)(address, n)

    rows: dict[str, list[Sample]] = {}
    with _servers.rlmesh_model() as server:
        address = server.address
        for _ in range(args.repeat):
            rows.setdefault("L0 asyncio grpclib, bytes (own process)", []).append(
                _plain_asyncio(address, n)
            )
            rows.setdefault("L1 same, loop = trio-asyncio", []).append(trio.run(l1, address))
            rows.setdefault("L2a JoinSession from Trio, no parse", []).append(
                trio.run(_session_from_trio, address, n, _identity)
            )
            rows.setdefault("L2b JoinSession from Trio + JoinResponse.parse", []).append(
                trio.run(_session_from_trio, address, n, model_pb.JoinResponse.parse)
            )
            rows.setdefault("L3 RemoteModel.predict", []).append(
                trio.run(_remote_model, address, n)
            )
    print(f"{n} predict round trips per run, median of {args.repeat} runs (us per round trip)")
    print(f"{'layer':<48} {'wall':>8} {'client cpu':>11}")
    for name, samples in rows.items():
        wall, cpu = _median(samples)
        print(f"{name:<48} {wall:8.0f} {cpu:11.0f}")


if __name__ == "__main__":
    main()
