"""LocalEnv: the env host as an in-process RuntimeEnv, env calls in worker threads."""

from __future__ import annotations

import struct

import gymnasium as gym
import pytest
import trio

from rlmesh_trio import RuntimeEnv
from rlmesh_trio._errors import EnvRpcError
from rlmesh_trio._protocol import env_pb, spaces_pb
from rlmesh_trio.inprocess._local_env import LocalEnv

from .._envhost_envs import CountingEnv, Gate


def act(*values: int) -> spaces_pb.SpaceValue:
    return spaces_pb.SpaceValue(leaves=[b"".join(struct.pack("<q", v) for v in values)])


async def test_cartpole_session_end_to_end() -> None:
    env = LocalEnv(lambda: gym.make("CartPole-v1"))
    assert isinstance(env, RuntimeEnv)
    info = await env.connect()
    assert info.contract is not None and info.contract.spec.id == "CartPole-v1"
    assert info.editions == ("2026.06",) and info.has_capability("subset_step")
    await env.configure("2026.06")
    reply = await env.reset(env_pb.ResetRequest(seeds=[1], episode_ids=["e0"]))
    assert len(reply.response.observation.leaves[0]) == 16
    assert reply.telemetry["endpoint.total"] >= reply.telemetry["endpoint.user"] > 0
    completed: list[env_pb.EpisodeMetadata] = []
    while not completed:
        step = await env.step(env_pb.StepRequest(action=act(1), episode_ids=["e0"]))
        completed = step.response.completed_episodes
    assert completed[0].episode_id == "e0" and completed[0].step_count == 9
    await env.reset(env_pb.ResetRequest(episode_ids=["e1"]))
    final = await env.close(timeout=5)
    assert [e.episode_id for e in final] == ["e1"]
    host = env.host
    await env.aclose()
    await env.aclose()
    assert host is not None and host._closed


async def test_errors_map_to_env_rpc_error_and_session_ends_when_fatal() -> None:
    inner = CountingEnv()
    env = LocalEnv(inner)
    await env.connect()
    await env.configure("2026.06")
    with pytest.raises(EnvRpcError) as bad:
        await env.step(env_pb.StepRequest(action=act(7)))
    assert bad.value.recoverable and bad.value.code == int(env_pb.EnvErrorCode.INVALID_ACTION)
    assert "[InvalidAction] $: value 7 not in range [0, 3)" in bad.value.message
    inner.fail_with = RuntimeError("kaput")
    with pytest.raises(EnvRpcError) as fatal:
        await env.step(env_pb.StepRequest(action=act(1)))
    assert not fatal.value.recoverable
    assert "step failed: RuntimeError: kaput" in fatal.value.message
    with pytest.raises(EnvRpcError, match="session ended"):
        await env.reset(env_pb.ResetRequest())
    assert await env.close(timeout=1) == []
    await env.aclose()
    assert not inner.closed  # we did not create it, so we do not close it


async def test_bad_edition_is_refused() -> None:
    env = LocalEnv(CountingEnv())
    await env.connect()
    with pytest.raises(EnvRpcError, match="does not implement"):
        await env.configure("2099.01")


async def test_blocking_step_does_not_stall_other_tasks() -> None:
    slow = CountingEnv(done_at=99)
    # The step blocks its worker thread until the ticker, a Trio task, lets it go:
    # a step that stalled the Trio thread would never see the gate open.
    gate = slow.gate = Gate()
    env = LocalEnv(slow)
    await env.connect()
    await env.reset(env_pb.ResetRequest())
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            if ticks >= 5 and gate.reached.is_set():
                gate.set()
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await env.step(env_pb.StepRequest(action=act(1)))
        nursery.cancel_scope.cancel()
    assert ticks >= 5


async def test_cancelled_step_is_abandoned_and_close_still_works() -> None:
    slow = CountingEnv(done_at=99)
    env = LocalEnv(slow)
    await env.connect()
    await env.reset(env_pb.ResetRequest(episode_ids=["a"]))
    # The step's thread stays blocked until after the cancelled call has returned:
    # the call is abandoned, not waited for.
    gate = slow.gate = Gate()

    async def cancel_once_blocked(scope: trio.CancelScope) -> None:
        await trio.to_thread.run_sync(gate.reached.wait, 10)
        scope.cancel()

    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_once_blocked, scope)
            await env.step(env_pb.StepRequest(action=act(1)))
    assert scope.cancelled_caught and gate.reached.is_set() and not gate.is_set()
    gate.set()
    final = await env.close(timeout=5)
    assert [e.episode_id for e in final] == ["a"]
    await env.aclose()


async def test_factory_env_is_closed_by_aclose() -> None:
    made: list[CountingEnv] = []

    def factory() -> CountingEnv:
        made.append(CountingEnv())
        return made[-1]

    env = LocalEnv(factory)
    await env.connect()
    await env.aclose()
    assert made and made[0].closed


async def test_lanes_served_concurrently() -> None:
    slow, fast = CountingEnv(done_at=99), CountingEnv(done_at=99)
    env = LocalEnv([slow, fast])
    info = await env.connect()
    assert info.contract.num_envs == 2
    for lane in (0, 1):
        await env.reset(env_pb.ResetRequest(env_indices=[lane], episode_ids=[f"l{lane}"]))
    # Lane 0's step is held until lane 1's has finished: served one after the other,
    # lane 1 would wait behind lane 0 (until the gate's own 10 s bound) and come second.
    gate = slow.gate = Gate()
    order: list[int] = []

    async def one(lane: int) -> None:
        await env.step(env_pb.StepRequest(action=act(1), env_indices=[lane]))
        order.append(lane)
        if lane == 1:
            gate.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, 0)
        assert await trio.to_thread.run_sync(gate.reached.wait, 10)  # lane 0 is in its step
        nursery.start_soon(one, 1)
    assert order == [1, 0]


async def test_factory_failures_and_unservable_envs_are_reported() -> None:
    from rlmesh_trio._errors import ConnectError, InvalidSpec

    def broken() -> None:
        raise RuntimeError("no simulator licence")

    with pytest.raises(ConnectError, match="RuntimeError: no simulator licence"):
        await LocalEnv(broken).connect()
    same_step = gym.vector.SyncVectorEnv(
        [CountingEnv, CountingEnv], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    with pytest.raises(InvalidSpec, match="SAME_STEP"):
        await LocalEnv(same_step).connect()


async def test_async_with_connects_and_closes() -> None:
    made: list[CountingEnv] = []

    def factory() -> CountingEnv:
        made.append(CountingEnv())
        return made[-1]

    async with LocalEnv(factory, label="counting") as env:
        assert env.label == "counting"
        assert env.host is not None and env.host.contract.num_envs == 1
    assert made[0].closed


def _lean(obs: object) -> object:
    import numpy as np

    arr = np.asarray(obs)
    return (arr[..., 2] > 0).astype(np.int64) if arr.ndim == 2 else int(arr[2] > 0)


def _cartpole_vector() -> gym.vector.SyncVectorEnv:
    venv = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(2)],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
    venv.reset(seed=11)
    return venv


@pytest.mark.parametrize(
    ("make", "budget"),
    [
        (lambda: gym.make("CartPole-v1"), {"seeds": range(4)}),
        (lambda: [gym.make("CartPole-v1") for _ in range(3)], {"seeds": range(6)}),
        (_cartpole_vector, {"episodes": 6}),
    ],
    ids=["single", "lanes", "vector"],
)
async def test_in_process_and_served_envs_give_the_same_episodes(make, budget) -> None:
    import rlmesh_trio as rt

    local = await rt.run_routes([rt.Route(env=make(), model=_lean, **budget)])
    async with rt.serve_env(make()) as server:
        served = await rt.run_routes([rt.Route(env=server.address, model=_lean, **budget)])

    def key(report: object) -> list[tuple[object, int, float]]:
        return sorted((e.seed, e.steps, e.reward) for e in report.episodes)  # type: ignore[attr-defined]

    assert key(local) == key(served)
    assert len(local.episodes) == (len(budget["seeds"]) if "seeds" in budget else 6)
