"""LocalModel.predict after an inline sync policy: no scheduler pass unless it matters."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import trio

from rlmesh_trio import spaces
from rlmesh_trio._protocol import model_pb
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.inprocess._local_model import LocalModel

from .test_local_model import SPEC, ctx, resolve


def predict_request(n: int) -> model_pb.PredictRequest:
    obs = np.array([0.0, 0.0, 0.05, 0.0], np.float32)
    return model_pb.PredictRequest(
        context=ctx("e1", f"e1:predict:{n}"),
        observation=spaces.encode_batch(SPEC.observation_space, [obs]),
        episode_info=[model_pb.EpisodeInfo(episode_id="ep")],
    )


async def test_a_deadline_that_passes_during_an_inline_call_still_cancels() -> None:
    def slow(obs: Any) -> int:
        time.sleep(0.05)  # blocks the Trio thread past the deadline, never yields
        return cartpole_policy(obs)

    model = LocalModel(slow)
    await resolve(model)
    with trio.CancelScope(deadline=trio.current_time() + 0.01) as scope:
        await model.predict(predict_request(1))
    assert scope.cancelled_caught


async def test_a_pending_cancellation_is_honoured() -> None:
    model = LocalModel(cartpole_policy)
    await resolve(model)
    with trio.CancelScope() as scope:
        scope.cancel()
        await model.predict(predict_request(1))
        pytest.fail("predict returned inside a cancelled scope")  # pragma: no cover
    assert scope.cancelled_caught


async def test_a_fast_inline_call_returns_without_a_scheduler_pass() -> None:
    model = LocalModel(cartpole_policy)
    await resolve(model)
    ran: list[int] = []

    async def other() -> None:
        ran.append(1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        reply = await model.predict(predict_request(1))
        assert ran == []  # the sibling did not get a turn inside predict
    assert ran == [1]
    assert reply.response.actions
