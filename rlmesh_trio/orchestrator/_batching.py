"""Cross-route predict batching: routes sharing a model endpoint share its round trips.

Predicts that are waiting at the same moment go out together as one
``GroupedPredict`` (the model server fuses the groups into one batched call
when the policy has a batched form). While one round trip is in flight, new
predicts queue up and form the next group, so batching grows with load and
costs nothing when there is nothing to batch. Per-route semantics do not
change: each route still checks its own context, gets its own error, and
keeps its own timeout (a route that gives up simply abandons its place).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import trio

from .._wire import model_pb
from ..runtime import EndpointInfo, Reply

__all__ = ["GroupingModel", "PredictBatcher"]

DEFAULT_MAX_GROUP = 64
#: Grouped round trips in flight per model address: enough to overlap the wire
#: with the model's work, few enough that groups still form under load.
DEFAULT_IN_FLIGHT = 2


class GroupingModel(Protocol):
    """A model client that can send several routes' predicts in one round trip."""

    async def predict(
        self, request: model_pb.PredictRequest
    ) -> Reply[model_pb.PredictResponse]: ...

    async def grouped_predict(
        self, requests: Sequence[model_pb.PredictRequest]
    ) -> Sequence[Reply[model_pb.PredictResponse] | BaseException]: ...


class _Pending:
    __slots__ = ("abandoned", "done", "error", "reply", "request")

    def __init__(self, request: model_pb.PredictRequest) -> None:
        self.request = request
        self.done = trio.Event()
        self.reply: Reply[model_pb.PredictResponse] | None = None
        self.error: BaseException | None = None
        self.abandoned = False


class PredictBatcher:
    """A :class:`~rlmesh_trio.runtime.RuntimeModel` facade over a shared model client.

    Everything but ``predict`` goes straight to the client. Run :meth:`serve`
    in a nursery that outlives the routes using it; cancelling it fails any
    predict still waiting with ``trio.Cancelled`` in that route's own scope.
    """

    def __init__(
        self, model: Any, *, max_group: int = DEFAULT_MAX_GROUP, in_flight: int = DEFAULT_IN_FLIGHT
    ) -> None:
        self.model = model
        self.max_group = max_group
        self.in_flight = in_flight
        self._send, self._recv = trio.open_memory_channel[_Pending](math.inf)
        self.round_trips = 0
        self.grouped_round_trips = 0

    @property
    def label(self) -> str:
        return str(getattr(self.model, "label", getattr(self.model, "address", "model")))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send queued predicts, at most ``in_flight`` round trips at a time, until cancelled.

        ``in_flight`` long-lived sender tasks take turns: an idle one takes
        the next predict plus everything queued behind it as one group, so
        predicts that arrive while every sender is busy join the next group.
        (No task is started per round trip.)
        """
        async with trio.open_nursery() as nursery:
            for _ in range(self.in_flight):
                nursery.start_soon(self._sender)
            task_status.started()

    async def _sender(self) -> None:
        receive, receive_nowait = self._recv.receive, self._recv.receive_nowait
        while True:
            batch = [await receive()]
            while len(batch) < self.max_group:
                try:
                    batch.append(receive_nowait())
                except trio.WouldBlock:
                    break
            live = [p for p in batch if not p.abandoned]
            if live:
                await self._send_batch(live)

    async def _send_batch(self, batch: list[_Pending]) -> None:
        self.round_trips += 1
        try:
            if len(batch) == 1:
                batch[0].reply = await self.model.predict(batch[0].request)
            else:
                self.grouped_round_trips += 1
                results = await self.model.grouped_predict([p.request for p in batch])
                for pending, result in zip(batch, results, strict=True):
                    if isinstance(result, BaseException):
                        pending.error = result
                    else:
                        pending.reply = result
        except Exception as exc:  # the whole round trip failed: every route in it sees it
            for pending in batch:
                pending.error = exc
        finally:
            for pending in batch:
                pending.done.set()

    # -- RuntimeModel ----------------------------------------------------------
    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        """Queue ``request`` for the next round trip and wait for its own answer.

        Cancellation: the caller's scope (the route's predict timeout) still
        applies; a cancelled predict leaves the queue and is never sent, or
        its answer is dropped if it was already on the wire.
        """
        pending = _Pending(request)
        self._send.send_nowait(pending)
        try:
            await pending.done.wait()
        except BaseException:
            pending.abandoned = True
            raise
        if pending.error is not None:
            raise pending.error
        assert pending.reply is not None
        return pending.reply

    async def connect(self) -> EndpointInfo:
        return await self.model.connect()  # type: ignore[no-any-return]

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        await self.model.resolve_adapter(request)

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        await self.model.reset_adapter(request)

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        await self.model.release_adapter(request, timeout)

    async def aclose(self) -> None:
        """The shared client is closed by the run that owns it, not by one route."""
        return None
