"""Cross-route predict batching over a real model server on loopback."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

import rlmesh_trio as rt
from rlmesh_trio import Orchestrator
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.orchestrator._batching import PredictBatcher


class CountingPolicy:
    """The demo rule, with a batched form that counts how it is called."""

    def __init__(self) -> None:
        self.single_calls = 0
        self.batch_calls = 0
        self.batch_rows = 0

    def predict(self, obs: np.ndarray) -> int:
        self.single_calls += 1
        return cartpole_policy(obs)

    def predict_batch(self, obs: np.ndarray) -> np.ndarray:
        self.batch_calls += 1
        self.batch_rows += len(obs)
        return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def _routes(model_address: str) -> list[rt.Route]:
    return rt.shard(
        envs=[(lambda: gymnasium.make("CartPole-v1")) for _ in range(4)],
        model=model_address,
        seeds=range(8),
        max_episode_steps=60,
    )


def _episodes(report: rt.RunReport) -> list[tuple[int | None, int, float]]:
    return sorted((ep.seed, ep.steps, ep.reward) for ep in report.episodes)


async def test_batched_run_matches_unbatched_and_groups_predicts() -> None:
    policy = CountingPolicy()
    async with rt.serve_model(policy, "127.0.0.1:0") as server:
        plain = await rt.run_routes(_routes(server.address))
        orchestrator = Orchestrator(_routes(server.address), batch_predicts=True)
        batched = await orchestrator.run()
    assert plain.ok and batched.ok
    assert _episodes(batched) == _episodes(plain)
    assert batched.total_steps == plain.total_steps == 8 * 60
    # The model server fused grouped predicts into batched policy calls.
    assert policy.batch_calls > 0
    assert policy.batch_rows > policy.batch_calls
    sizes = [row for row in batched.telemetry if row.metric == "group.size"]
    assert sizes and sizes[0].avg > 1.0


async def test_batcher_keeps_per_route_errors() -> None:
    class Client:
        @staticmethod
        def answer(request: Any) -> Any:
            if request.context.request_id == "1":
                return rt.ModelRpcError("m", "bad group 1")
            return rt.Reply(request)

        async def predict(self, request: Any) -> Any:
            result = self.answer(request)
            if isinstance(result, Exception):
                raise result
            return result

        async def grouped_predict(self, requests: list) -> list:
            return [self.answer(r) for r in requests]

    import trio

    from rlmesh_trio._protocol import model_pb

    batcher = PredictBatcher(Client(), in_flight=1)  # one round trip at a time: groups form
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        request = model_pb.PredictRequest(context=model_pb.AdapterContext(request_id=str(i)))
        try:
            results[i] = (await batcher.predict(request)).response
        except rt.ModelRpcError as exc:
            results[i] = exc

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        async with trio.open_nursery() as routes:
            for i in range(3):
                routes.start_soon(one, i)
        nursery.cancel_scope.cancel()
    assert isinstance(results[1], rt.ModelRpcError) and "bad group 1" in str(results[1])
    assert results[0].context.request_id == "0"  # type: ignore[union-attr]
    assert results[2].context.request_id == "2"  # type: ignore[union-attr]
    # All three were waiting together, so at most one went out on its own.
    assert batcher.grouped_round_trips >= 1
    assert batcher.round_trips <= 2


async def test_batcher_bounds_round_trips_in_flight_and_skips_abandoned(
    autojump_clock: Any,
) -> None:
    """On the virtual clock: the round trips' length and route 9's patience order exactly."""
    import trio

    from rlmesh_trio._protocol import model_pb

    class SlowClient:
        def __init__(self) -> None:
            self.in_flight = 0
            self.peak = 0
            self.sent: list[list[str]] = []

        async def _trip(self, ids: list[str]) -> None:
            self.sent.append(ids)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await trio.sleep(0.05)
            self.in_flight -= 1

        async def predict(self, request: Any) -> Any:
            await self._trip([request.context.request_id])
            return rt.Reply(request)

        async def grouped_predict(self, requests: list) -> list:
            await self._trip([r.context.request_id for r in requests])
            return [rt.Reply(r) for r in requests]

    client = SlowClient()
    batcher = PredictBatcher(client, in_flight=2)
    answered: list[str] = []

    async def one(i: int, patience: float) -> None:
        request = model_pb.PredictRequest(context=model_pb.AdapterContext(request_id=str(i)))
        with trio.move_on_after(patience):
            answered.append((await batcher.predict(request)).response.context.request_id)

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        async with trio.open_nursery() as routes:
            for i in range(10):
                # route 9 gives up while queued behind the first two round trips
                routes.start_soon(one, i, 0.01 if i == 9 else 5.0)
                await trio.sleep(0)
        nursery.cancel_scope.cancel()
    assert client.peak == 2
    assert sorted(answered, key=int) == [str(i) for i in range(9)]
    assert "9" not in [rid for ids in client.sent for rid in ids]  # abandoned: never sent
    assert any(len(ids) > 1 for ids in client.sent)


async def test_direct_path_groups_bounds_and_answers_from_the_reply(autojump_clock: Any) -> None:
    """A client that sends without waiting: no sender task; the next group goes out on landing.

    On the virtual clock, the 0.1 s pause runs until every route is queued and route 8
    has given up, however loaded the machine.
    """
    import trio

    from rlmesh_trio._protocol import model_pb

    class SubmittingClient:
        def __init__(self) -> None:
            self.in_flight: list[tuple[list[Any], Any]] = []
            self.sent: list[list[str]] = []
            self.peak = 0
            self.ready = True  # False: "no stream yet", the batcher falls back

        def submit_predicts(self, requests: list, on_done: Any) -> bool:
            if not self.ready:
                return False
            self.sent.append([r.context.request_id for r in requests])
            self.in_flight.append((list(requests), on_done))
            self.peak = max(self.peak, len(self.in_flight))
            return True

        def answer_oldest(self) -> None:
            requests, on_done = self.in_flight.pop(0)
            on_done(
                [
                    rt.ModelRpcError("m", "bad 4") if r.context.request_id == "4" else rt.Reply(r)
                    for r in requests
                ]
            )

        async def predict(self, request: Any) -> Any:  # the fallback path
            return rt.Reply(request)

    client = SubmittingClient()
    batcher = PredictBatcher(client, in_flight=2)
    answered: dict[str, object] = {}

    async def one(i: int, patience: float) -> None:
        request = model_pb.PredictRequest(context=model_pb.AdapterContext(request_id=str(i)))
        with trio.move_on_after(patience):
            try:
                answered[str(i)] = (await batcher.predict(request)).response.context.request_id
            except rt.ModelRpcError as exc:
                answered[str(i)] = exc

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        async with trio.open_nursery() as routes:
            for i in range(9):  # 0 and 1 take both slots; 2..8 queue (8 gives up)
                routes.start_soon(one, i, 0.05 if i == 8 else 5.0)
                await trio.sleep(0)
            await trio.sleep(0.1)
            assert client.sent == [["0"], ["1"]]  # no sender task involved
            client.answer_oldest()  # lands -> the queue goes out as one group, minus 8
            assert client.sent[2] == [str(i) for i in range(2, 8)]
            while client.in_flight:
                client.answer_oldest()
        client.ready = False  # no stream: the sender tasks take over
        await one(9, 5.0)
        nursery.cancel_scope.cancel()
    assert client.peak == 2
    assert "8" not in answered and all(ids != ["8"] for ids in client.sent)
    assert isinstance(answered["4"], rt.ModelRpcError) and "bad 4" in str(answered["4"])
    assert {k: v for k, v in answered.items() if k != "4"} == {
        str(i): str(i) for i in range(10) if i not in (4, 8)
    }
    assert batcher.grouped_round_trips == 1 and batcher.round_trips == 4
