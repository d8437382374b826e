"""Fused blocks: routes that share one in-process policy, driven as ONE block by one task.

Many routes over one-env in-process endpoints that share one policy object
(``rt.shard(envs=[...], model=module)``) would each run their own task: one
one-row predict and one env step per route per step, and a task switch
between them, which costs more than the step itself for a fast env. A
:class:`FusedBlock` drives all of them in one task instead: per round one
``predict_rows`` over every active lane's observation (one batched forward
pass), one step of all those lanes (a tight loop of env steps), and numpy
bookkeeping (a :class:`~._block_loop.BlockDrive` whose lanes belong to
different routes).

Each route still runs its own :class:`~._driver.RouteDriver`: its handshake,
configure and ResolveAdapter, its shielded, bounded terminal close, its own
:class:`~._episodes.EpisodeBook` (seeds, trials, budget, caps), telemetry,
hooks (so its ledger entries) and report. Only its drive loop is replaced:
the driver takes a :class:`FusedSeat` (from the orchestrator), and where the
route can be fused (:meth:`FusedBlock.admits`) it joins the block with its
lanes and waits until the block has spent its budget.

A route is fused only when nothing needs its own loop: driver-owned resets,
no observation, action or step hook (those are shown one message per step;
such a route keeps its own loop), the env is one the block's env accepts
(in-process, same spaces) and the model serves the route's rows the way it
serves the block's (same plan), with the block's limits.

Failure: a failing call or hook fails the route it belongs to (an env or
model error names the route's own lane in ``env_index``); the block stops,
and the other routes wait for their cancellation (the orchestrator fuses
only under ``on_failure="cancel_siblings"``, so they end ``RouteCancelled``
naming the failed route). Episodes finished before are kept: they are in
each route's book and ledger. A timeout fails the first route whose lanes were
in the call that ran over, named as the per-route path names it (its own
component and runtime step), with the other routes of that call
(``OperationTimeout.fused_with``, named in its message).

Cancellation: a route cancelled while it waits leaves the block (its lanes
are not stepped again) and re-raises; the block task is the orchestrator's
service, cancelled with the run.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol, runtime_checkable

import trio

from .._blocks import LaneBlockEnv, LaneBlockModel
from .._errors import EnvRpcError, ModelRpcError, OperationTimeout
from ._block_loop import BlockDrive
from ._block_member import BlockMember, local_error
from ._episodes import Lane
from ._loop import RouteLoop
from ._session import Session
from ._spec import Limits
from ._timer import WatchdogTimer

__all__ = ["FusableEnv", "FusableModel", "FusedBlock", "FusedSeat", "quiet_route"]


@runtime_checkable
class FusableEnv(LaneBlockEnv, Protocol):
    """A lane-block env that gathers the lanes of other (in-process) env endpoints."""

    def add(self, endpoint: Any) -> int | None:
        """Take ``endpoint``'s lanes as this block's next lanes: the first one's index,
        or None when it cannot (another kind of endpoint, other spaces)."""
        ...


@runtime_checkable
class FusableModel(LaneBlockModel, Protocol):
    """A lane-block model that says which routes' rows one ``predict_rows`` may serve."""

    def rows_key(self, env_id: str) -> Hashable | None:
        """Routes with equal keys are predicted alike (same policy, spaces and plan):
        their rows may share one call under any of their ``env_id``; None: no rows plan."""
        ...

    @property
    def keeps_episode_state(self) -> bool:
        """False when ResetAdapter is a no-op (the block then skips it per episode)."""
        ...


def quiet_route(loop: RouteLoop, session: Session) -> bool:
    """Driver-owned resets and no observation, action or step hook: a block may drive it."""
    gate = loop.gate
    if session.env_owns_resets:
        return False
    if gate.transform_observation or gate.observation or gate.transform_action:
        return False
    return not (gate.action or gate.step)


class FusedBlock:
    """One task driving the lanes of every route that joins (see the module doc).

    ``serve`` is the task (the orchestrator runs it as a service). Routes get
    a :class:`FusedSeat` each (:meth:`seat`) before their session starts;
    rounds begin once no seat is still in setup, and a route that joins later
    (a queued route) joins between rounds.
    """

    def __init__(self, env: FusableEnv, model: FusableModel, label: str) -> None:
        self.env = env
        self.model = model
        self.label = label
        self.timer = WatchdogTimer(f"fused:{label}", trio.current_time)
        self._drive: BlockDrive | None = None
        self._key: Hashable | None = None
        self._limits: Limits | None = None
        self._pending = 0
        self._wake = trio.Event()
        self.failed: BaseException | None = None
        #: Routes that joined, and the block's predicts (one per round).
        self.routes = 0

    @property
    def rounds(self) -> int:
        return self._drive.rounds if self._drive is not None else 0

    def seat(self) -> FusedSeat:
        """A route's place, held while its session sets up (release it when done)."""
        self._pending += 1
        return FusedSeat(self)

    def _released(self) -> None:
        self._pending -= 1
        self._wake.set()

    def admits(self, loop: RouteLoop, session: Session) -> bool:
        """Whether the route can be fused: see the module doc."""
        if self.failed is not None or not quiet_route(loop, session):
            return False
        calls = loop.calls
        model = self.model
        if calls.model is not model or not model.block_ready(calls.spec.env_id):
            return False
        key = model.rows_key(calls.spec.env_id)
        if key is None or (self._key is not None and key != self._key):
            return False
        limits = calls.spec.limits
        return self._limits is None or limits == self._limits

    def join(self, loop: RouteLoop, lanes: list[Lane]) -> BlockMember | None:
        """Add the route's env lanes to the block (None: its env cannot join)."""
        calls = loop.calls
        offset = self.env.add(calls.env)
        if offset is None:
            return None
        spec = calls.spec
        if self._drive is None:
            self._key = self.model.rows_key(spec.env_id)
            self._limits = spec.limits
            component = (f"fused:{self.label}", spec.model_component_id)
            self._drive = BlockDrive(self.env, self.model, self.timer, spec.limits, component)
            self._drive.reset_adapters = self.model.keeps_episode_state
        member = BlockMember(loop, lanes)
        self._drive.join(member)
        assert member.offset == offset, "the block env and the drive number lanes alike"
        self.routes += 1
        self._wake.set()
        return member

    def leave(self, member: BlockMember) -> None:
        if self._drive is not None:
            self._drive.leave(member)

    async def serve(self) -> None:
        """The block's task: rounds while any route has lanes to run, until cancelled.

        Cancellation: cancelled with the run (every waiting route is cancelled too).
        """
        while self.failed is None:
            drive = self._drive
            if drive is None or self._pending > 0 or not drive.has_work:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            try:
                async with self.timer.guard():
                    await drive.run()
            except Exception as exc:
                self._fail(drive, exc)
        await trio.sleep_forever()

    def _fail(self, drive: BlockDrive, exc: Exception) -> None:
        """Fail the route at fault (the lane's; for a timeout the first route in the call;
        else the first active lane's); stop."""
        self.failed = exc
        others: list[BlockMember] = []
        member: BlockMember | None
        if isinstance(exc, OperationTimeout) and (called := drive.call_members()):
            member, *others = called
        else:
            lane = exc.env_index if isinstance(exc, EnvRpcError | ModelRpcError) else None
            member = drive.member_of(lane) if lane is not None else drive.first_live()
        if member is None:
            return
        drive.book(member)
        if isinstance(exc, OperationTimeout):
            error: BaseException = _route_timeout(exc, member, others)
        else:
            error = local_error(exc, member, member.loop.calls.step)
        member.finish(error)


def _route_timeout(
    exc: OperationTimeout, member: BlockMember, others: list[BlockMember]
) -> OperationTimeout:
    """The block's timeout as the per-route path names it: the route, its own component
    and runtime step (the step in flight for ``env.step``), and the other routes whose
    lanes shared the call."""
    spec = member.loop.calls.spec
    env_op = exc.operation.startswith("env.")
    step = member.loop.calls.step + (1 if exc.operation == "env.step" else 0)
    error = OperationTimeout(
        member.route_id,
        spec.env_component_id if env_op else spec.model_component_id,
        exc.operation,
        step,
        exc.timeout,
        fused_with=tuple(m.route_id for m in others),
    )
    error.__cause__ = exc.__cause__
    return error


class FusedSeat:
    """One route's place in a :class:`FusedBlock`."""

    def __init__(self, block: FusedBlock) -> None:
        self.block = block
        self._held = True

    def release(self) -> None:
        """The route is done with setup (joined, or drives itself); idempotent."""
        if self._held:
            self._held = False
            self.block._released()

    async def drive(self, loop: RouteLoop, session: Session, lanes: list[Lane]) -> bool:
        """Join the block and wait for the route's budget; False when the route cannot
        be fused (it then drives itself).

        Cancellation: the route leaves the block; ``trio.Cancelled`` propagates.
        Raises:
            RlmeshTrioError: the route error the block failed with on this route.
        """
        block = self.block
        try:
            member = block.join(loop, lanes) if block.admits(loop, session) else None
        finally:
            self.release()
        if member is None:
            return False
        try:
            await member.done.wait()
        except BaseException:
            block.leave(member)
            raise
        if member.error is not None:
            raise member.error
        return True
