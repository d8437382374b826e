"""Cross-route predict batching: routes sharing a model endpoint share its round trips.

Predicts that are waiting at the same moment go out together as one
``GroupedPredict`` (the model server fuses the groups into one batched call
when the policy has a batched form). While every round-trip slot is busy,
new predicts queue up and form the next group, so batching grows with load
and costs nothing when there is nothing to batch. Per-route semantics do not
change: each route still checks its own context, gets its own error, and
keeps its own timeout (a route that gives up simply abandons its place).

With a client that can send without waiting (``submit_predicts``, as
:class:`~rlmesh_trio.RemoteModel` does) no task sits in between:
the route that finds a slot free sends the group, and the group's answer is
handed out -- and the next queued group sent -- right where the reply is
read. Other clients are served by ``in_flight`` sender tasks.

Whether grouping pays is measured, per model (:mod:`._grouping`): with an
adaptive :class:`GroupingRule` the batcher sends singles -- each route's own
``predict``, exactly as without batching -- whenever the last windows say
single calls answer more predicts per second, and re-checks now and then.
A group goes out when every route registered on the batcher (by its
``resolve_adapter``) that has no predict in flight has asked, or at most
:data:`MAX_HOLD` after its first predict queued, whichever comes first.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import trio

from .._endpoints import EndpointInfo, Reply, SubmitsPredicts
from .._protocol import model_pb
from ._grouping import GROUP, GroupingRule

__all__ = ["MAX_HOLD", "PredictBatcher"]

DEFAULT_MAX_GROUP = 64
#: Grouped round trips in flight per model address. One: predicts that arrive
#: while a round trip is out wait for it and leave together. Measured on case 7 of
#: ``benchmarks/compare_rlmesh.py`` (eight routes, one served MLP, 2 cores): 3.3
#: predicts per round trip against 2.0 with two in flight (a lone early predict took
#: the second slot), and 8% less CPU per step over client and servers.
DEFAULT_IN_FLIGHT = 1
#: The longest a group waits for the routes that have not asked yet (seconds). Routes woken
#: by one group's answers all ask within the same scheduler pass, so the hold only matters
#: for routes whose env answers later: 500 us is about ten route steps of client CPU
#: (``benchmarks/orchestrator_fakes.py``: 30-50 us each), so a group waits for a route a few
#: steps behind but never for one in a slow env call.
MAX_HOLD = 0.0005


class _Stopped(RuntimeError):
    """The batcher was cancelled while a predict was on its way."""


class _Pending:
    """One route's predict waiting in the batcher; ``task`` is the route, parked on it.

    The route parks itself on its own task (no ``trio.Event`` per predict): a
    predict is made and woken once per route step.
    """

    __slots__ = ("abandoned", "epoch", "error", "reply", "request", "settled", "task")

    def __init__(self, request: model_pb.PredictRequest, epoch: int) -> None:
        self.request = request
        self.epoch = epoch
        self.settled = False
        self.task: trio.lowlevel.Task | None = None
        self.reply: Reply[model_pb.PredictResponse] | None = None
        self.error: BaseException | None = None
        self.abandoned = False

    def abort(self, _raise_cancel: Any) -> trio.lowlevel.Abort:
        """The route's wait was cancelled: it leaves the queue (or drops a late answer)."""
        self.abandoned = True
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED


class PredictBatcher:
    """A :class:`~rlmesh_trio.RuntimeModel` facade over a shared model client.

    Everything but ``predict`` goes straight to the client. Run :meth:`serve`
    in a nursery that outlives the routes using it; cancelling it fails any
    predict still waiting with ``trio.Cancelled`` in that route's own scope.
    ``rule`` decides group or single per window (default: always group);
    ``max_hold`` bounds how long a group waits for routes still to ask.
    """

    def __init__(
        self,
        model: Any,
        *,
        max_group: int = DEFAULT_MAX_GROUP,
        in_flight: int = DEFAULT_IN_FLIGHT,
        rule: GroupingRule | None = None,
        max_hold: float = MAX_HOLD,
    ) -> None:
        self.model = model
        self.max_group = max_group
        self.in_flight = in_flight
        self.rule = rule if rule is not None else GroupingRule(fixed=GROUP)
        self.max_hold = max_hold
        self._send, self._recv = trio.open_memory_channel[_Pending](math.inf)
        self.round_trips = 0
        self.grouped_round_trips = 0
        self.single_calls = 0  # predicts the rule sent on their own
        # Routes using the batcher (adapter keys) and the grouped rows not answered yet.
        self._routes: set[tuple[str, str]] = set()
        self._rows_out = 0
        # The hold of the direct path: when it ends, and the holder task's wake-up.
        self._hold_deadline: float | None = None
        self._hold_over = False
        self._hold_armed = trio.Event()
        # The direct path (a client with submit_predicts): queued predicts, slots in use.
        self._submit: Callable[..., bool] | None = (
            model.submit_predicts if isinstance(model, SubmitsPredicts) else None
        )
        self._queue: deque[_Pending] = deque()
        self._busy = 0

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
            if self._submit is not None:
                nursery.start_soon(self._holder)
            task_status.started()

    def _waiting_routes(self) -> int:
        """Routes that may still ask before a group goes: registered, none of theirs out."""
        return len(self._routes) - self._rows_out

    async def _sender(self) -> None:
        receive = self._recv.receive
        while True:
            batch = [await receive()]
            self._gather(batch)
            want = min(self.max_group, self._waiting_routes())
            if len(batch) < want:  # hold for the routes still to ask, boundedly
                with trio.move_on_after(self.max_hold):
                    while len(batch) < want:
                        batch.append(await receive())
                        self._gather(batch)
            live = [p for p in batch if not p.abandoned]
            if live:
                await self._send_batch(live)

    def _gather(self, batch: list[_Pending]) -> None:
        receive_nowait = self._recv.receive_nowait
        while len(batch) < self.max_group:
            try:
                batch.append(receive_nowait())
            except trio.WouldBlock:
                return

    async def _send_batch(self, batch: list[_Pending]) -> None:
        self._count(batch)
        self._rows_out += len(batch)
        results: Sequence[Any]
        try:
            if len(batch) == 1:
                results = [await self.model.predict(batch[0].request)]
            else:
                results = await self.model.grouped_predict([p.request for p in batch])
        except Exception as exc:  # the whole round trip failed: every route in it sees it
            results = [exc] * len(batch)
        except BaseException:  # the batcher itself is cancelled: no route may wait forever
            _settle(
                batch, [_Stopped("the predict batcher stopped before the answer came")] * len(batch)
            )
            raise
        finally:
            self._rows_out -= len(batch)
        _settle(batch, results)
        self.rule.answered(len(batch), batch[0].epoch)

    def _count(self, batch: list[_Pending]) -> None:
        self.round_trips += 1
        if len(batch) > 1:
            self.grouped_round_trips += 1

    # -- the direct path ---------------------------------------------------------
    def _launch(self) -> None:
        """Send queued predicts as groups while a round-trip slot is free (never blocks)."""
        submit = self._submit
        assert submit is not None
        while self._queue and self._busy < self.in_flight:
            if not self._hold_over and len(self._queue) < self._waiting_routes():
                self._arm_hold()
                return
            self._hold_over, self._hold_deadline = False, None
            batch: list[_Pending] = []
            while self._queue and len(batch) < self.max_group:
                pending = self._queue.popleft()
                if not pending.abandoned:
                    batch.append(pending)
            if not batch:
                return
            self._busy += 1
            self._rows_out += len(batch)
            try:
                sent = submit([p.request for p in batch], lambda r, b=batch: self._landed(b, r))
            except Exception as exc:
                self._busy -= 1
                self._rows_out -= len(batch)
                self._count(batch)
                _settle(batch, [exc] * len(batch))
                continue
            if sent:
                self._count(batch)
            else:  # no stream yet: the sender tasks take these
                self._busy -= 1
                self._rows_out -= len(batch)
                for pending in batch:
                    self._send.send_nowait(pending)

    def _landed(self, batch: list[_Pending], results: Sequence[Any]) -> None:
        self._busy -= 1
        self._rows_out -= len(batch)
        _settle(batch, results)
        self.rule.answered(len(batch), batch[0].epoch)
        self._launch()

    def _arm_hold(self) -> None:
        if self._hold_deadline is None:
            self._hold_deadline = trio.current_time() + self.max_hold
            self._hold_armed.set()

    async def _holder(self) -> None:
        """The direct path's hold: at its deadline, send what has queued so far."""
        while True:
            await self._hold_armed.wait()
            self._hold_armed = trio.Event()
            while self._hold_deadline is not None:
                deadline = self._hold_deadline
                await trio.sleep_until(deadline)
                if self._hold_deadline is not None and self._hold_deadline <= deadline:
                    self._hold_deadline, self._hold_over = None, True
                    self._launch()

    # -- RuntimeModel ----------------------------------------------------------
    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        """Queue ``request`` for the next round trip and wait for its own answer.

        Cancellation: the caller's scope (the route's predict timeout) still
        applies; a cancelled predict leaves the queue and is never sent, or
        its answer is dropped if it was already on the wire.
        """
        rule = self.rule
        if not rule.grouping:
            return await self._single(request, rule)
        pending = _Pending(request, rule.epoch)
        if self._submit is not None:
            self._queue.append(pending)
            self._launch()
        else:
            self._send.send_nowait(pending)
        if pending.settled:  # answered at once (a client that answers inside submit)
            try:
                await trio.lowlevel.checkpoint()
            except BaseException:
                pending.abandoned = True
                raise
        else:
            pending.task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(pending.abort)
        if pending.error is not None:
            raise pending.error
        assert pending.reply is not None
        return pending.reply

    async def _single(
        self, request: model_pb.PredictRequest, rule: GroupingRule
    ) -> Reply[model_pb.PredictResponse]:
        """The rule says single calls pay: the route's own predict, timed for the rule."""
        epoch = rule.epoch
        reply: Reply[model_pb.PredictResponse] = await self.model.predict(request)
        self.single_calls += 1
        rule.answered(1, epoch)
        return reply

    async def connect(self) -> EndpointInfo:
        return await self.model.connect()  # type: ignore[no-any-return]

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        """Resolve on the client; the route then counts among those a group waits for."""
        await self.model.resolve_adapter(request)
        self._routes.add(_route_key(request.context))

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        await self.model.reset_adapter(request)

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        self._routes.discard(_route_key(request.context))
        await self.model.release_adapter(request, timeout)

    async def aclose(self) -> None:
        """The shared client is closed by the run that owns it, not by one route."""
        return None


def _settle(batch: list[_Pending], results: Sequence[Any]) -> None:
    """Give every pending predict its own result (a reply or an error) and wake its route."""
    reschedule = trio.lowlevel.reschedule
    for pending, result in zip(batch, results, strict=True):
        if isinstance(result, BaseException):
            pending.error = result
        else:
            pending.reply = result
        pending.settled = True
        task = pending.task
        if task is not None:
            pending.task = None
            reschedule(task)


def _route_key(context: model_pb.AdapterContext | None) -> tuple[str, str]:
    if context is None:
        return ("", "")
    return (context.session_id, context.env_id)
