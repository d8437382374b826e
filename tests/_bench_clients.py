"""Benchmark: one route-like loop (reset, then predict+step until done) over our gRPC
clients against rlmesh 0.1.0's servers, compared with alternatives.

Run: ``python -m tests._bench_clients [steps]`` from the repo root (needs rlmesh).
Not collected by pytest. Prints steps/s and per-step latency for:

* ``trio-slot``: RemoteEnv/RemoteModel as shipped (direct HTTP/2 write in,
  Trio slot out: no asyncio task per request; hand-rolled hot-path codec);
* the same with betterproto2 encoding/decoding every message;
* the same with every send going through the writer task;
* ``trio-aio_as_trio``: the same clients, but each request crosses the bridge
  with ``trio_asyncio.aio_as_trio`` into an asyncio coroutine awaiting a future;
* ``asyncio-grpclib``: plain asyncio + grpclib, no Trio at all (the floor);
* ``rlmesh.run``: rlmesh's own runtime with ``RemoteModel`` (its served-route path);
* the bare bridge hop costs.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import trio
import trio_asyncio

from rlmesh_trio._wire import env_pb, model_pb
from rlmesh_trio.transport import _remote_env, _remote_model
from rlmesh_trio.transport._handshake import handshake_request
from rlmesh_trio.transport._join import JoinSession
from rlmesh_trio.transport._remote_env import RemoteEnv
from rlmesh_trio.transport._remote_model import RemoteModel

from . import _asyncio_bridge as bridge
from ._raw_codec import RawCodec
from ._rlmesh_procs import rlmesh_env, rlmesh_model

EDITION = "2026.06"


def ctx(env_id: str, rid: str) -> model_pb.AdapterContext:
    return model_pb.AdapterContext(session_id="bench", env_id=env_id, request_id=rid)


async def route(env: RemoteEnv, model: RemoteModel, target: int) -> tuple[int, float]:
    info = await env.connect()
    await model.connect()
    assert info.contract is not None and info.contract.spec is not None
    await env.configure(EDITION)
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=ctx("b", "b:resolve_adapter"),
            env_spec=info.contract.spec,
            selected_workflow_edition=EDITION,
            execution_horizon=1,
        )
    )
    n, episode = 0, 0
    started = time.perf_counter()
    while n < target:
        eid = f"e{episode}"
        obs = (
            await env.reset(env_pb.ResetRequest(seeds=[episode], episode_ids=[eid]))
        ).response.observation
        while True:
            n += 1
            p = await model.predict(
                model_pb.PredictRequest(
                    context=ctx("b", f"b:predict:{n}"),
                    observation=obs,
                    episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=episode)],
                )
            )
            s = await env.step(env_pb.StepRequest(action=p.response.actions[0], episode_ids=[eid]))
            obs = s.response.observation
            if s.response.completed_episodes:
                break
        episode += 1
    return n, time.perf_counter() - started


class _FutureSlot:
    """Adapter: lets the session's reader resolve an asyncio future."""

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future

    def resolve(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


async def _aio_request(session: Any, request_id: str, payload: bytes) -> Any:
    future = asyncio.get_running_loop().create_future()
    session._pending[request_id] = _FutureSlot(future)
    session._outbox.put_nowait(payload)
    return await future


async def _aio_as_trio_request(
    self: Any, request_id: str, payload: bytes, *, kill_on_cancel: bool
) -> Any:
    return await bridge.call(_aio_request, self, request_id, payload)


def _never_direct(self: Any, payload: bytes) -> bool:
    return False


_FAST = (
    _remote_env.encode_env_step,
    _remote_env.decode_env_response,
    _remote_model.encode_model_predict,
    _remote_model.decode_model_response,
)


def _use_fastwire(on: bool) -> None:
    if on:
        (
            _remote_env.encode_env_step,
            _remote_env.decode_env_response,
            _remote_model.encode_model_predict,
            _remote_model.decode_model_response,
        ) = _FAST
    else:
        _remote_env.encode_env_step = lambda rid, request: None  # type: ignore[assignment]
        _remote_model.encode_model_predict = lambda rid, request: None  # type: ignore[assignment]
        _remote_env.decode_env_response = env_pb.JoinResponse.parse  # type: ignore[assignment]
        _remote_model.decode_model_response = model_pb.JoinResponse.parse  # type: ignore[assignment]


async def trio_variant(env_addr: str, model_addr: str, target: int, hop: str) -> tuple[int, float]:
    original, original_send_now = JoinSession.request, JoinSession._send_now
    if hop == "aio_as_trio":
        JoinSession.request = _aio_as_trio_request  # type: ignore[method-assign]
    if hop == "queue":
        JoinSession._send_now = _never_direct  # type: ignore[method-assign]
    _use_fastwire(hop != "betterproto2")
    try:
        async with RemoteEnv(env_addr) as env, RemoteModel(model_addr) as model:
            return await route(env, model, target)
    finally:
        JoinSession.request = original  # type: ignore[method-assign]
        JoinSession._send_now = original_send_now  # type: ignore[method-assign]
        _use_fastwire(True)


async def asyncio_variant(env_addr: str, model_addr: str, target: int) -> tuple[int, float]:
    """The same loop in plain asyncio with grpclib: strictly one request in flight."""
    import grpclib.client
    import grpclib.const

    from rlmesh_trio.transport._address import parse_address

    def channel(text: str) -> grpclib.client.Channel:
        a = parse_address(text)
        return grpclib.client.Channel(a.host, a.port, codec=RawCodec())

    env_ch, model_ch = channel(env_addr), channel(model_addr)
    bidi = grpclib.const.Cardinality.STREAM_STREAM
    hs = await env_ch.request(
        "/rlmesh.env.v1.EnvService/Handshake", grpclib.const.Cardinality.UNARY_UNARY, bytes, bytes
    ).__aenter__()
    await hs.send_message(
        bytes(env_pb.HandshakeRequest(base=handshake_request("rlmesh-env"))), end=True
    )
    spec = env_pb.HandshakeResponse.parse(await hs.recv_message()).env_contract.spec
    await hs.__aexit__(None, None, None)
    async with (
        env_ch.request("/rlmesh.env.v1.EnvService/Join", bidi, bytes, bytes) as es,
        model_ch.request("/rlmesh.model.v1.ModelService/Join", bidi, bytes, bytes) as ms,
    ):
        rid = 0

        async def env_rt(req: env_pb.JoinRequest) -> env_pb.JoinResponse:
            nonlocal rid
            rid += 1
            req.request_id = f"grpc-req-{rid}"
            await es.send_message(bytes(req))
            return env_pb.JoinResponse.parse(await es.recv_message())

        async def model_rt(req: model_pb.JoinRequest, rid_: str) -> model_pb.JoinResponse:
            req.request_id = rid_
            await ms.send_message(bytes(req))
            return model_pb.JoinResponse.parse(await ms.recv_message())

        await env_rt(
            env_pb.JoinRequest(
                configure=env_pb.ConfigureEnvRequest(selected_workflow_edition=EDITION)
            )
        )
        await model_rt(
            model_pb.JoinRequest(
                resolve_adapter=model_pb.ResolveAdapterRequest(
                    context=ctx("b", "b:resolve"),
                    env_spec=spec,
                    selected_workflow_edition=EDITION,
                    execution_horizon=1,
                )
            ),
            "b:resolve",
        )
        n, episode = 0, 0
        started = time.perf_counter()
        while n < target:
            eid = f"e{episode}"
            obs = (
                await env_rt(
                    env_pb.JoinRequest(
                        reset=env_pb.ResetRequest(seeds=[episode], episode_ids=[eid])
                    )
                )
            ).reset.observation
            while True:
                n += 1
                rid_ = f"b:predict:{n}"
                p = await model_rt(
                    model_pb.JoinRequest(
                        predict=model_pb.PredictRequest(
                            context=ctx("b", rid_),
                            observation=obs,
                            episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=episode)],
                        )
                    ),
                    rid_,
                )
                s = (
                    await env_rt(
                        env_pb.JoinRequest(
                            step=env_pb.StepRequest(action=p.predict.actions[0], episode_ids=[eid])
                        )
                    )
                ).step
                obs = s.observation
                if s.completed_episodes:
                    break
            episode += 1
        elapsed = time.perf_counter() - started
        await es.end()
        await ms.end()
        # drain to the stream ends
        while await es.recv_message() is not None:
            pass
        while await ms.recv_message() is not None:
            pass
    env_ch.close()
    model_ch.close()
    return n, elapsed


def rlmesh_run_variant(env_addr: str, model_addr: str, episodes: int) -> tuple[int, float]:
    import rlmesh

    started = time.perf_counter()
    result = rlmesh.run(rlmesh.RemoteModel(model_addr), env_addr, seeds=list(range(episodes)))
    elapsed = time.perf_counter() - started
    steps = int(result.total_steps)
    return steps, elapsed


async def hop_costs() -> dict[str, float]:
    async with trio_asyncio.open_loop() as loop:

        async def noop() -> int:
            return 1

        n = 5000
        fn = trio_asyncio.aio_as_trio(noop)
        for _ in range(200):
            await fn()
        t = time.perf_counter()
        for _ in range(n):
            await fn()
        aio = (time.perf_counter() - t) / n

        queue: asyncio.Queue[bridge.Slot[None]] = asyncio.Queue()

        async def echo() -> None:
            while True:
                (await queue.get()).resolve(None)

        loop.call_soon(lambda: asyncio.ensure_future(echo()))
        await trio.sleep(0.01)
        t = time.perf_counter()
        for _ in range(n):
            slot: bridge.Slot[None] = bridge.Slot()
            queue.put_nowait(slot)
            await slot.wait()
        slot_hop = (time.perf_counter() - t) / n
    return {"aio_as_trio": aio, "queue+slot": slot_hop}


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    hops = trio.run(hop_costs)
    print(
        "bridge round trip (Trio -> asyncio -> Trio), no I/O: "
        + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in hops.items())
    )
    variants: dict[str, Any] = {
        "trio: slot + direct write (shipped)": lambda e, m: trio.run(
            trio_variant, e, m, target, "slot"
        ),
        "trio: betterproto2 codec": lambda e, m: trio.run(
            trio_variant, e, m, target, "betterproto2"
        ),
        "trio: slot + writer task": lambda e, m: trio.run(trio_variant, e, m, target, "queue"),
        "trio: aio_as_trio per request": lambda e, m: trio.run(
            trio_variant, e, m, target, "aio_as_trio"
        ),
        "asyncio + grpclib (no Trio)": lambda e, m: asyncio.run(asyncio_variant(e, m, target)),
        "rlmesh.run(RemoteModel)": lambda e, m: rlmesh_run_variant(e, m, max(1, target // 500)),
    }
    best: dict[str, float] = {}
    for _ in range(rounds):  # interleaved rounds; best of N resists a busy machine
        for name, run in variants.items():
            with rlmesh_env() as env, rlmesh_model() as model:
                steps, elapsed = run(env.address, model.address)
            best[name] = min(best.get(name, float("inf")), elapsed / steps)
    for name, per_step in best.items():
        rate, micros = 1 / per_step, per_step * 1e6
        print(f"{name:38s} {rate:6.0f} steps/s  {micros:6.0f} us/step (best of {rounds})")


if __name__ == "__main__":
    main()
