"""Our gRPC clients against the REAL rlmesh 0.1.0 servers (subprocesses on loopback).

Env: ``python -m rlmesh._cli.serve_env --env CartPole-v1`` and ``rlmesh.EnvServer``
(lanes, failing env, remote shutdown). Model: ``rlmesh.numpy.Model(policy).serve``.
"""

from __future__ import annotations

import struct
import time

import pytest
import trio

from rlmesh_trio._errors import ConnectError, EnvRpcError, HandshakeError, ModelRpcError
from rlmesh_trio._protocol import core_pb, env_pb, model_pb, spaces_pb
from rlmesh_trio.transport.client._health import check_health
from rlmesh_trio.transport.client._remote_env import SHUTDOWN_CONNECTION_LOST, RemoteEnv
from rlmesh_trio.transport.client._remote_model import RemoteModel

from .._asyncio_bridge import asyncio_loop
from .._rlmesh_procs import RlmeshServers
from .._waits import process_ended

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


EDITION = "2026.06"


def action(*values: int) -> spaces_pb.SpaceValue:
    """A Discrete action slab over len(values) lanes (int64 LE per lane)."""
    return spaces_pb.SpaceValue(leaves=[b"".join(struct.pack("<q", v) for v in values)])


def obs_floats(value: spaces_pb.SpaceValue) -> tuple[float, ...]:
    (leaf,) = value.leaves
    return struct.unpack(f"<{len(leaf) // 4}f", leaf)


def context(env_id: str, request_id: str) -> model_pb.AdapterContext:
    return model_pb.AdapterContext(session_id="interop", env_id=env_id, request_id=request_id)


async def test_handshake_reports_the_cartpole_contract(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        info = await env.connect()
    assert info.label == server.address
    assert info.editions == (EDITION,)
    assert info.preferred_edition == EDITION
    assert info.has_capability("subset_step")
    assert info.peer is not None and info.peer.component == "rlmesh-env"
    contract = info.contract
    assert contract is not None and contract.spec is not None
    assert contract.num_envs == 1
    assert contract.autoreset_mode == core_pb.AutoresetMode.DISABLED
    spec = contract.spec
    assert spec.id == "CartPole-v1"
    assert bytes(spec.action_space) == bytes(
        spaces_pb.SpaceSpec(dtype=spaces_pb.DataType.INT64, discrete=spaces_pb.DiscreteSpec(n=2))
    )
    obs = spec.observation_space
    assert obs is not None and obs.box is not None and obs.box.elementwise is not None
    assert list(obs.shape) == [4]
    assert obs.dtype == spaces_pb.DataType.FLOAT32
    assert obs.box.elementwise.low.hex() == "9a9999c0000080ff5077d6be000080ff"
    assert obs.box.elementwise.high.hex() == "9a9999400000807f5077d63e0000807f"
    assert spec.metadata is not None
    assert spec.metadata.entries["render_fps"].integer == 50


async def test_episode_runs_to_completion_with_our_ids(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        await env.connect()
        await env.configure(EDITION)
        first = await env.reset(env_pb.ResetRequest(seeds=[7], episode_ids=["ep-a"]))
        again = await env.reset(env_pb.ResetRequest(seeds=[7], episode_ids=["ep-b"]))
        assert obs_floats(first.response.observation) == obs_floats(again.response.observation)
        assert first.telemetry["endpoint.total"] > 0
        steps, reward = 0, 0.0
        done: dict[str, env_pb.EpisodeMetadata] = {}
        while "ep-b" not in done:
            reply = await env.step(
                env_pb.StepRequest(action=action(1), episode_ids=["ep-b"], timeout_ms=300_000)
            )
            steps += 1
            reward += reply.response.rewards[0]
            done.update((e.episode_id, e) for e in reply.response.completed_episodes)
            assert steps < 600
    # the reset interrupted ep-a: it surfaces (truncated) on the next step
    assert done["ep-a"].truncated and not done["ep-a"].terminated
    episode = done["ep-b"]
    assert episode.seed == 7
    assert episode.step_count == steps
    assert episode.cumulative_reward == pytest.approx(reward)
    assert episode.terminated
    assert reply.response.terminated_mask == b"\x01"


async def test_invalid_action_is_recoverable(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        await env.connect()
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        with pytest.raises(EnvRpcError) as info:
            await env.step(env_pb.StepRequest(action=action(5), episode_ids=["e"]))
        assert info.value.code == int(env_pb.EnvErrorCode.INVALID_ACTION)
        assert info.value.recoverable is True
        assert "not in range" in info.value.message
        reply = await env.step(env_pb.StepRequest(action=action(0), episode_ids=["e"]))
        assert len(reply.response.rewards) == 1  # the session is still usable


async def test_second_join_is_refused_as_endpoint_in_use(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as first, RemoteEnv(server.address) as second:
        await first.configure(EDITION)
        await second.connect()  # a handshake takes no slot
        with pytest.raises(ConnectError) as info:
            await second.configure(EDITION)
    assert server.address in str(info.value)
    assert "in use" in str(info.value)


async def test_close_returns_final_episodes_and_ends_the_session(
    rlmesh_servers: RlmeshServers,
) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(seeds=[1], episode_ids=["open-ep"]))
        await env.step(env_pb.StepRequest(action=action(0), episode_ids=["open-ep"]))
        final = await env.close(timeout=5)
        assert [e.episode_id for e in final] == ["open-ep"]
        assert final[0].truncated and not final[0].terminated
        assert final[0].step_count == 1
        with pytest.raises(EnvRpcError, match="connection closed"):
            await env.step(env_pb.StepRequest(action=action(0), episode_ids=["open-ep"]))
        # Close ends the session, not the server: the same client can join again
        await env.configure(EDITION)
        reply = await env.reset(env_pb.ResetRequest(seeds=[1], episode_ids=["next-ep"]))
        assert len(reply.response.observation.leaves) == 1
        with pytest.raises(RuntimeError, match="already has an open Join session"):
            await env.configure(EDITION)


async def test_unsupported_edition_pin_is_a_handshake_error(
    rlmesh_servers: RlmeshServers,
) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        with pytest.raises(HandshakeError) as info:
            await env.configure("2099.01")
    assert server.address in str(info.value)
    assert 'workflow edition "2099.01"' in str(info.value)


async def test_render_without_render_mode_has_no_frame(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        assert await env.render(0) is None


async def test_render_returns_png_frames(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env("framed")
    async with RemoteEnv(server.address) as env:
        info = await env.connect()
        assert info.contract is not None and info.contract.render_mode == "rgb_array"
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        frame = await env.render(0)
        with pytest.raises(EnvRpcError) as info_err:
            await env.render(3)  # lane out of range: 0.1.0 answers INTERNAL and ends the stream
        assert info_err.value.code == int(env_pb.EnvErrorCode.INTERNAL)
        assert not info_err.value.recoverable
        assert "out of range" in info_err.value.message
    assert frame is not None
    assert frame.startswith(b"\x89PNG\r\n\x1a\n")


async def test_render_failure_is_internal(rlmesh_servers: RlmeshServers) -> None:
    # CartPole's rgb_array render needs pygame, absent here: the env raises
    server = rlmesh_servers.env(kwargs_json='{"render_mode": "rgb_array"}')
    async with RemoteEnv(server.address) as env:
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        try:
            frame = await env.render(0)
        except EnvRpcError as exc:
            assert exc.code == int(env_pb.EnvErrorCode.INTERNAL)
            assert exc.message.startswith("environment error: [Internal] render failed")
        else:  # pygame happens to be installed
            assert frame is not None and frame.startswith(b"\x89PNG")


async def test_env_exception_is_internal_and_ends_the_stream(
    rlmesh_servers: RlmeshServers,
) -> None:
    server = rlmesh_servers.env("failing")
    async with RemoteEnv(server.address) as env:
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        with pytest.raises(EnvRpcError) as info:
            for _ in range(10):
                await env.step(env_pb.StepRequest(action=action(0), episode_ids=["e"]))
        assert info.value.code == int(env_pb.EnvErrorCode.INTERNAL)
        assert info.value.recoverable is False
        assert "injected failure" in info.value.message
        with pytest.raises(EnvRpcError) as closed:
            await env.step(env_pb.StepRequest(action=action(0), episode_ids=["e"]))
        assert closed.value.message == "transport error: connection closed"


async def test_killed_server_is_connection_closed(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env()
    async with RemoteEnv(server.address) as env:
        await env.configure(EDITION)
        await env.reset(env_pb.ResetRequest(episode_ids=["e"]))
        server.kill()
        with pytest.raises(EnvRpcError) as info:
            await env.step(env_pb.StepRequest(action=action(0), episode_ids=["e"]))
    assert info.value.message == "transport error: connection closed"


async def test_unreachable_address_fails_fast() -> None:
    async with asyncio_loop():
        # port 1 on loopback: nothing listens there
        env = RemoteEnv("127.0.0.1:1", connect_timeout=5)
        with pytest.raises(ConnectError, match=r"127\.0\.0\.1:1"):
            await env.connect()
        await env.aclose()


async def test_lanes_step_concurrently_with_seeds(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env(lanes=3)
    completed: dict[int, env_pb.EpisodeMetadata] = {}
    async with RemoteEnv(server.address) as env:
        info = await env.connect()
        assert info.contract is not None and info.contract.num_envs == 3
        assert info.has_capability("subset_step")
        await env.configure(EDITION)

        async def run_lane(k: int) -> None:
            eid = f"lane-{k}"
            reply = await env.reset(
                env_pb.ResetRequest(seeds=[100 + k], env_indices=[k], episode_ids=[eid])
            )
            assert len(reply.response.observation.leaves[0]) == 16  # one lane
            for _ in range(600):
                step = await env.step(
                    env_pb.StepRequest(action=action(k % 2), env_indices=[k], episode_ids=[eid])
                )
                assert list(step.response.env_indices) == [k]
                if step.response.completed_episodes:
                    completed[k] = step.response.completed_episodes[0]
                    return

        async with trio.open_nursery() as nursery:
            for k in range(3):
                nursery.start_soon(run_lane, k)
    assert sorted(completed) == [0, 1, 2]
    for k, episode in completed.items():
        assert episode.episode_id == f"lane-{k}"
        assert episode.env_index == k
        assert episode.seed == 100 + k


async def test_vector_env_next_step_whole_width(rlmesh_servers: RlmeshServers) -> None:
    server = rlmesh_servers.env(vector=2)
    async with RemoteEnv(server.address) as env:
        info = await env.connect()
        assert info.contract is not None
        assert info.contract.autoreset_mode == core_pb.AutoresetMode.NEXT_STEP
        assert not info.has_capability("subset_step")
        await env.configure(EDITION)
        ids = ["v0", "v1"]
        await env.reset(env_pb.ResetRequest(episode_ids=ids))
        for _ in range(600):
            reply = await env.step(env_pb.StepRequest(action=action(1, 1), episode_ids=ids))
            assert len(reply.response.rewards) == 2
            if reply.response.completed_episodes:
                break
        assert {e.episode_id for e in reply.response.completed_episodes} <= {"v0", "v1"}
        assert reply.response.completed_episodes


async def test_shutdown_refused_by_default_and_accepted_when_allowed(
    rlmesh_servers: RlmeshServers,
) -> None:
    default = rlmesh_servers.env()
    allowed = rlmesh_servers.env(allow_shutdown=True)
    async with RemoteEnv(default.address) as env:
        accepted, message = await env.shutdown()
    assert not accepted
    assert "disabled" in message
    async with RemoteEnv(allowed.address) as env:
        accepted, message = await env.shutdown("owner shutdown")
    assert accepted
    # 0.1.0 sometimes drops the connection before its reply is flushed
    assert message in ("shutdown accepted: owner shutdown", SHUTDOWN_CONNECTION_LOST)
    await process_ended(allowed.process, 20)  # the accepted shutdown ends the process


async def test_health_model_serving_env_unimplemented(rlmesh_servers: RlmeshServers) -> None:
    env = rlmesh_servers.env()
    model = rlmesh_servers.model()
    assert await check_health(model.address) == "SERVING"
    assert await check_health(env.address) is None


async def _resolve(model: RemoteModel, env_id: str, spec: core_pb.EnvSpec) -> None:
    await model.resolve_adapter(
        model_pb.ResolveAdapterRequest(
            context=context(env_id, f"{env_id}:resolve_adapter"),
            env_spec=spec,
            selected_workflow_edition=EDITION,
            execution_horizon=1,
        )
    )


async def test_model_resolve_predict_release(rlmesh_servers: RlmeshServers) -> None:
    env_server = rlmesh_servers.env()
    model_server = rlmesh_servers.model()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        contract = (await env.connect()).contract
        assert contract is not None and contract.spec is not None
        info = await model.connect()
        assert info.has_capability("rlmesh.model.concurrent_predict.v1")
        assert info.contract is None
        await _resolve(model, "route-1", contract.spec)
        obs = spaces_pb.SpaceValue(leaves=[struct.pack("<4f", 0.0, 0.0, 0.1, 0.0)])
        request = model_pb.PredictRequest(
            context=context("route-1", "route-1:predict:1"),
            observation=obs,
            episode_info=[model_pb.EpisodeInfo(episode_id="e1", seed=3)],
        )
        reply = await model.predict(request)
        assert reply.response.context == request.context
        assert reply.response.actions[0].leaves == [struct.pack("<q", 1)]  # leans right -> push 1
        assert reply.telemetry["endpoint.total"] > 0
        await model.reset_adapter(
            model_pb.ResetAdapterRequest(
                context=context("route-1", "route-1:reset_adapter:2"), episode_ids=["e1"]
            )
        )
        await model.release_adapter(
            model_pb.ReleaseAdapterRequest(
                context=context("route-1", "route-1:release_adapter"), reason="done"
            ),
            timeout=5,
        )
        request.context = context("route-1", "route-1:predict:3")
        with pytest.raises(ModelRpcError) as info_err:
            await model.predict(request)
    assert "not resolved" in info_err.value.message
    assert info_err.value.component_id == model_server.address


async def test_failing_policy_is_a_model_error(rlmesh_servers: RlmeshServers) -> None:
    env_server = rlmesh_servers.env()
    model_server = rlmesh_servers.model("failing")
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        contract = (await env.connect()).contract
        assert contract is not None and contract.spec is not None
        await _resolve(model, "r", contract.spec)
        with pytest.raises(ModelRpcError, match="exploded on purpose"):
            await model.predict(
                model_pb.PredictRequest(
                    context=context("r", "r:predict:1"),
                    observation=spaces_pb.SpaceValue(leaves=[bytes(16)]),
                    episode_info=[model_pb.EpisodeInfo(episode_id="e")],
                )
            )


async def run_route(
    env: RemoteEnv, model: RemoteModel, env_id: str, seeds: list[int]
) -> list[tuple[int, float]]:
    """A route-like loop: reset, then predict+step until done, per seed. Returns (steps, reward)."""
    info = env.info or await env.connect()
    assert info.contract is not None and info.contract.spec is not None
    await env.configure(EDITION)
    await _resolve(model, env_id, info.contract.spec)
    results, n = [], 0
    for seed in seeds:
        eid = f"{env_id}-{seed}"
        reset = await env.reset(env_pb.ResetRequest(seeds=[seed], episode_ids=[eid]))
        obs = reset.response.observation
        while True:
            n += 1
            prediction = await model.predict(
                model_pb.PredictRequest(
                    context=context(env_id, f"{env_id}:predict:{n}"),
                    observation=obs,
                    episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=seed)],
                )
            )
            step = await env.step(
                env_pb.StepRequest(action=prediction.response.actions[0], episode_ids=[eid])
            )
            obs = step.response.observation
            if step.response.completed_episodes:
                done = step.response.completed_episodes[-1]
                assert done.episode_id == eid
                results.append((int(done.step_count), done.cumulative_reward))
                break
    await model.release_adapter(
        model_pb.ReleaseAdapterRequest(context=context(env_id, f"{env_id}:release_adapter")),
        timeout=5,
    )
    return results


async def test_shared_model_serves_two_routes_concurrently(rlmesh_servers: RlmeshServers) -> None:
    env_a, env_b = rlmesh_servers.env(), rlmesh_servers.env()
    model_server = rlmesh_servers.model()
    results: dict[str, list[tuple[int, float]]] = {}
    seeds = [1, 2]
    async with (
        RemoteModel(model_server.address) as model,
        RemoteEnv(env_a.address) as a,
        RemoteEnv(env_b.address) as b,
    ):
        await model.connect()

        async def go(name: str, env: RemoteEnv) -> None:
            results[name] = await run_route(env, model, name, seeds)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(go, "route-a", a)
            nursery.start_soon(go, "route-b", b)
    # same seeds, same deterministic policy: identical episodes on both routes
    assert results["route-a"] == results["route-b"]
    assert all(steps > 0 and reward == steps for steps, reward in results["route-a"])


async def test_grouped_predict_isolates_a_failing_group(rlmesh_servers: RlmeshServers) -> None:
    env_server = rlmesh_servers.env()
    model_server = rlmesh_servers.model()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        contract = (await env.connect()).contract
        assert contract is not None and contract.spec is not None
        await _resolve(model, "g1", contract.spec)

        def group(env_id: str) -> model_pb.PredictRequest:
            return model_pb.PredictRequest(
                context=context(env_id, f"{env_id}:predict:1"),
                observation=spaces_pb.SpaceValue(leaves=[struct.pack("<4f", 0, 0, -0.1, 0)]),
                episode_info=[model_pb.EpisodeInfo(episode_id=f"{env_id}-e")],
            )

        ok, failed = await model.grouped_predict([group("g1"), group("unresolved")])
    assert not isinstance(ok, Exception)
    assert ok.response.actions[0].leaves == [struct.pack("<q", 0)]
    assert ok.telemetry["group.size"] == 2
    assert isinstance(failed, ModelRpcError)
    assert "not resolved" in failed.message


@pytest.mark.slow
async def test_route_loop_latency_against_rlmesh(rlmesh_servers: RlmeshServers) -> None:
    """Throughput of one route over our clients (printed; not asserted against a clock)."""
    env_server = rlmesh_servers.env()
    model_server = rlmesh_servers.model()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        started = time.perf_counter()
        results = await run_route(env, model, "bench", [0, 1, 2, 3])
        elapsed = time.perf_counter() - started
    steps = sum(s for s, _ in results)
    print(f"\nroute loop: {steps} steps in {elapsed:.2f}s = {steps / elapsed:.0f} steps/s")
    assert steps == sum(r for _, r in results)


def test_routes_by_address_match_rlmesh_run_seed_for_seed(rlmesh_servers: RlmeshServers) -> None:
    """run_routes over our clients vs rlmesh's own runtime, same servers, same seeds."""
    import rlmesh

    from rlmesh_trio import Route, run

    seeds = [0, 1, 2, 3, 4]
    env_server = rlmesh_servers.env()
    model_server = rlmesh_servers.model("angle")
    ours = run([Route(env=env_server.address, model=model_server.address, seeds=seeds)])
    theirs = rlmesh.run(rlmesh.RemoteModel(model_server.address), env_server.address, seeds=seeds)
    mine = [(e.seed, e.steps, e.reward, e.terminated) for e in ours.episodes]
    reference = [(e.seed, e.steps, e.reward, e.terminated) for e in theirs.episodes]
    assert mine == reference
    assert len({steps for _, steps, _, _ in mine}) > 1  # the policy gives varied episodes
