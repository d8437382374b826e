"""The route driver against REAL rlmesh 0.1.0 env and model servers over loopback gRPC."""

from __future__ import annotations

import pytest

from rlmesh_trio import RouteDriver, RouteSpec
from rlmesh_trio.testing import RecordingHooks
from rlmesh_trio.transport.client._remote_env import RemoteEnv
from rlmesh_trio.transport.client._remote_model import RemoteModel

from .._rlmesh_procs import RlmeshServers

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]


async def test_single_env_seeds_truncation_and_release(rlmesh_servers: RlmeshServers) -> None:
    env_server, model_server = rlmesh_servers.env(), rlmesh_servers.model()
    hooks = RecordingHooks()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        spec = RouteSpec(route_id="interop", session_id="s", seeds=(1, 2, 3), max_episode_steps=20)
        report = await RouteDriver(spec, env, model, hooks).run()
    assert report.total_episodes == 3
    assert [e.seed for e in report.episodes] == [1, 2, 3]
    # The served CartPole policy balances: the runtime truncates at 20 steps; the env's
    # interrupted-episode echoes are dropped as stale.
    for episode in report.episodes:
        assert episode.steps <= 20
        assert episode.terminated or (episode.truncated and episode.steps == 20)
    telemetry = {(r.op, r.metric) for r in report.telemetry}
    assert ("env.step", "rpc.total") in telemetry and (
        "model.predict",
        "endpoint.total",
    ) in telemetry
    assert hooks.names()[-1] == "session_ended"


async def test_vector_env_next_step(rlmesh_servers: RlmeshServers) -> None:
    env_server, model_server = rlmesh_servers.env(vector=2), rlmesh_servers.model()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        spec = RouteSpec(route_id="vec", session_id="s", max_episodes=3)
        report = await RouteDriver(spec, env, model).run()
    assert report.total_episodes == 3
    assert all(e.steps > 0 and (e.terminated or e.truncated) for e in report.episodes)


async def test_lanes(rlmesh_servers: RlmeshServers) -> None:
    env_server, model_server = rlmesh_servers.env(lanes=3), rlmesh_servers.model()
    async with RemoteEnv(env_server.address) as env, RemoteModel(model_server.address) as model:
        spec = RouteSpec(
            route_id="lanes", session_id="s", seeds=(7, 8, 9, 10), max_episode_steps=15
        )
        report = await RouteDriver(spec, env, model).run()
    assert report.total_episodes == 4
    assert sorted(e.seed for e in report.episodes) == [7, 8, 9, 10]
    assert {e.env_index for e in report.episodes} <= {0, 1, 2}
