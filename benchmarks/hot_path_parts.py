"""What one step of our client costs, piece by piece (evidence for issue 7 item 3).

Captures the real Join messages of a short route against rlmesh 0.1.0's env
and model servers (subprocesses), then times, in isolation, every piece a
step of case 1 / case 3 pays: betterproto2 encode/decode of the exact
envelopes, the driver's per-step bookkeeping, the in-process policy call,
and a bare Trio <-> asyncio round through the bridge primitives::

    python benchmarks/hot_path_parts.py

Numbers are medians of repeated timed loops, in microseconds per call.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import trio  # noqa: E402
import trio_asyncio  # noqa: E402

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio._demo_policy import cartpole_policy  # noqa: E402
from rlmesh_trio._wire import env_pb, model_pb  # noqa: E402
from rlmesh_trio.transport import _join  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402


def us_per_call(fn: Callable[[], object], *, inner: int = 2000, rounds: int = 15) -> float:
    fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(samples)


def capture() -> dict[str, list[bytes]]:
    """Run one short route (served model) and keep every Join response's bytes, by path."""
    seen: dict[str, list[bytes]] = {}
    original = _join.JoinSession._deliver

    def spy(self: Any, data: bytes) -> None:
        seen.setdefault(self._path, []).append(bytes(data))
        original(self, data)

    _join.JoinSession._deliver = spy  # type: ignore[method-assign]
    try:
        with _servers.rlmesh_env() as env, _servers.rlmesh_model() as model:
            rt.run([rt.Route(env=env.address, model=model.address, seeds=[0])])
    finally:
        _join.JoinSession._deliver = original  # type: ignore[method-assign]
    return seen


async def bridge_round_us(n: int = 3000) -> float:
    """Trio puts on an asyncio queue, an asyncio task resolves a trio.Event: the Join path's hop."""
    from rlmesh_trio.transport._bridge import AsyncioQueue, Slot, spawn_asyncio

    async with trio_asyncio.open_loop():
        queue: Any = AsyncioQueue()

        async def echo() -> None:
            while True:
                slot = await queue.get()
                slot.resolve(None)

        loop = trio_asyncio.current_loop.get()
        task = loop.call_soon(lambda: spawn_asyncio(echo()))
        del task
        await trio.sleep(0.01)
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                slot: Slot[None] = Slot()
                queue.put_nowait(slot)
                await slot.wait()
            samples.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(samples)


async def trio_checkpoint_us(n: int = 20000) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        await trio.lowlevel.checkpoint()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    seen = capture()
    env_path = "/rlmesh.env.v1.EnvService/Join"
    model_path = "/rlmesh.model.v1.ModelService/Join"
    env_resps = [env_pb.JoinResponse.parse(b) for b in seen[env_path]]
    model_resps = [model_pb.JoinResponse.parse(b) for b in seen[model_path]]
    step_bytes = next(b for b, r in zip(seen[env_path], env_resps, strict=True) if r.step)
    pred_bytes = next(b for b, r in zip(seen[model_path], model_resps, strict=True) if r.predict)
    step_resp = env_pb.JoinResponse.parse(step_bytes)
    pred_resp = model_pb.JoinResponse.parse(pred_bytes)
    assert step_resp.step is not None and pred_resp.predict is not None
    obs = step_resp.step.observation
    action = pred_resp.predict.actions[0]
    ctx = pred_resp.predict.context
    assert obs is not None and ctx is not None
    eid = "0196f3c2-7f43-7a1e-9a3b-1c2d3e4f5a6b"

    def predict_envelope() -> bytes:
        req = model_pb.PredictRequest(
            context=model_pb.AdapterContext(
                session_id=ctx.session_id, env_id=ctx.env_id, request_id=ctx.request_id
            ),
            observation=obs,
            episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=0)],
        )
        return bytes(model_pb.JoinRequest(request_id=ctx.request_id, predict=req))

    def step_envelope() -> bytes:
        req = env_pb.StepRequest(action=action, timeout_ms=30000, episode_ids=[eid])
        return bytes(env_pb.JoinRequest(request_id="grpc-req-12", step=req))

    pe = predict_envelope()
    se = step_envelope()

    rows: list[tuple[str, float]] = []
    rows.append(
        ("encode model JoinRequest(predict) incl. building it", us_per_call(predict_envelope))
    )
    rows.append(
        (
            "decode model JoinResponse(predict)",
            us_per_call(lambda: model_pb.JoinResponse.parse(pred_bytes)),
        )
    )
    rows.append(("encode env JoinRequest(step) incl. building it", us_per_call(step_envelope)))
    rows.append(
        (
            "decode env JoinResponse(step)",
            us_per_call(lambda: env_pb.JoinResponse.parse(step_bytes)),
        )
    )
    rows.append(("  (bytes only) model JoinRequest.__bytes__ of a built message", 0.0))
    built = model_pb.JoinRequest.parse(pe)
    rows[-1] = (rows[-1][0], us_per_call(lambda: bytes(built)))
    built_step = env_pb.JoinRequest.parse(se)
    rows.append(
        (
            "  (bytes only) env JoinRequest.__bytes__ of a built message",
            us_per_call(lambda: bytes(built_step)),
        )
    )
    fw: Any = None
    try:  # the hand-rolled hot-message codec, when the transport has one
        fw = importlib.import_module("rlmesh_trio.transport._fastwire")
    except ImportError:
        pass
    if fw is not None:
        step_req, pred_req = built_step.step, built.predict
        assert step_req is not None and pred_req is not None
        rows.append(
            (
                "_fastwire: encode step + predict envelopes",
                us_per_call(
                    lambda: (
                        fw.encode_env_step("grpc-req-12", step_req),
                        fw.encode_model_predict(ctx.request_id, pred_req),
                    )
                ),
            )
        )
        rows.append(
            (
                "_fastwire: decode step + predict responses",
                us_per_call(
                    lambda: (
                        fw.decode_env_response(step_bytes),
                        fw.decode_model_response(pred_bytes),
                    )
                ),
            )
        )
    rows.append(
        (
            "  context equality check (response.context != ctx)",
            us_per_call(lambda: pred_resp.predict.context != ctx),  # type: ignore[union-attr]
        )
    )
    rows.append(
        (
            "  AdapterContext(...) construction alone",
            us_per_call(
                lambda: model_pb.AdapterContext(
                    session_id="route-0", env_id="e", request_id="e:p:1"
                )
            ),
        )
    )

    from rlmesh_trio.runtime._spec import mint_uuid7
    from rlmesh_trio.runtime._telemetry import RouteTelemetry
    from rlmesh_trio.transport._replies import reply_telemetry

    tel = RouteTelemetry(10.0, 0.0)
    telemetry = reply_telemetry(pred_resp, len(pe), len(pred_bytes), model=True)

    def telemetry_step() -> None:
        tel.add_operation("model.predict", "model", 1.0, telemetry)
        tel.add_operation("env.step", "env", 1.0, telemetry)
        tel.add("runner.round", "runner", "rpc.total", 1.0)

    rows.append(
        ("driver telemetry per step (2 add_operation + 1 add)", us_per_call(telemetry_step))
    )
    rows.append(
        (
            "reply_telemetry x2 per step",
            us_per_call(
                lambda: (
                    reply_telemetry(pred_resp, 100, 100, model=True),
                    reply_telemetry(step_resp, 100, 100),
                )
            ),
        )
    )
    rows.append(("mint_uuid7 (per episode only)", us_per_call(mint_uuid7)))

    # Case 3: the in-process policy path (LocalModel over the model host).
    from rlmesh_trio import spaces

    contract_obs = None
    for data in seen[env_path]:
        resp = env_pb.JoinResponse.parse(data)
        if resp.configure is not None:
            contract_obs = resp.configure
    del contract_obs
    import gymnasium as gym

    g = gym.make("CartPole-v1")
    obs_spec = spaces.from_gymnasium(g.observation_space)
    act_spec = spaces.from_gymnasium(g.action_space)
    rows.append(
        (
            "case 3: decode obs + policy + encode action (codec only)",
            us_per_call(
                lambda: spaces.encode_batch(
                    act_spec, [cartpole_policy(v) for v in spaces.decode_batch(obs_spec, obs, 1)]
                )
            ),
        )
    )

    async def local_predict_us() -> float:
        from rlmesh_trio import LocalModel
        from rlmesh_trio._wire import WORKFLOW_EDITION, core_pb

        model = LocalModel(cartpole_policy)
        await model.connect()
        await model.resolve_adapter(
            model_pb.ResolveAdapterRequest(
                context=model_pb.AdapterContext(session_id="s", env_id="e", request_id="r"),
                env_spec=core_pb.EnvSpec(action_space=act_spec, observation_space=obs_spec),
                selected_workflow_edition=WORKFLOW_EDITION,
                execution_horizon=1,
            )
        )
        request = model_pb.PredictRequest(
            context=model_pb.AdapterContext(session_id="s", env_id="e", request_id="r"),
            observation=obs,
            episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=0)],
        )
        n = 3000
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                await model.predict(request)
            samples.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(samples)

    rows.append(
        ("case 3: LocalModel.predict (whole in-process predict)", trio.run(local_predict_us))
    )
    rows.append(
        (
            "bridge: Trio -> asyncio queue -> Slot resolve -> Trio, one round",
            trio.run(bridge_round_us),
        )
    )
    rows.append(("trio checkpoint (schedule) alone", trio.run(trio_checkpoint_us)))

    print(
        f"sizes: predict req {len(pe)} B, resp {len(pred_bytes)} B; "
        f"step req {len(se)} B, resp {len(step_bytes)} B"
    )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value:8.1f} us")


if __name__ == "__main__":
    main()
