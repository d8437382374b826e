"""One strategy per drive mode, each a :class:`~._loop.DriveMode` for :meth:`RouteLoop.drive`.

* :class:`WholeEnv` -- a single env with driver-owned resets
  (DISABLED/UNSPECIFIED autoreset, ``num_envs == 1``);
* :class:`NextStepVector` -- a whole-width vector env with env-owned resets
  (NEXT_STEP, any ``num_envs``): new episode ids roll into the next
  ``StepRequest.episode_ids``;
* :class:`LaneMode` -- one lane of a vector env stepped lane by lane
  (DISABLED with the ``subset_step`` capability, ``num_envs > 1``):
  :func:`run_lanes` gives every lane its own task, so exactly one request per
  lane is in flight and lanes reset independently (``env_indices=[k]``);
* the block mode (``_block_loop.py``) -- every lane of a lane-block env in one
  task, one predict and one step per round over arrays (see :func:`block_endpoints`).

Each loop task owns a :class:`~._timer.WatchdogTimer` guarding its loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

from .._blocks import LaneBlockEnv, LaneBlockModel
from .._errors import InvalidSpec
from .._protocol import env_pb, spaces_pb
from ._block_loop import BlockDrive
from ._block_member import BlockMember
from ._episodes import Lane
from ._fused import FusableModel, FusedSeat, quiet_route
from ._loop import Answer, RouteLoop
from ._session import VECTOR_REFUSED, Session
from ._timer import WatchdogTimer

__all__ = [
    "LaneMode",
    "NextStepVector",
    "WholeEnv",
    "block_endpoints",
    "drive_route",
    "run_lanes",
]


class WholeEnv:
    """Every lane in every request; a reset restarts all lanes (one lane, in practice)."""

    def __init__(self, loop: RouteLoop, lanes: Sequence[Lane], timer: WatchdogTimer) -> None:
        self.loop = loop
        self.rows = lanes
        self.timer = timer
        self._step_ms = loop.calls.spec.limits.timeout_ms("env_step_timeout")
        self._reset_ms = loop.calls.spec.limits.timeout_ms("env_reset_timeout")
        self._resets = 0
        #: One lane with driver-owned resets: an in-process pair may trade frame leaves.
        self.fusable = len(lanes) == 1

    async def reset(self) -> spaces_pb.SpaceValue | None:
        """A whole-width reset with fresh ids (and, with driver-owned resets, the next seed)."""
        loop, lanes = self.loop, self.rows
        auto = self._resets > 0
        self._resets += 1
        for lane in lanes:
            loop.book.start(lane, auto)
        seeds = [lane.seed for lane in lanes if lane.seed is not None]
        request = env_pb.ResetRequest(
            seeds=seeds if len(seeds) == len(lanes) else [],
            options=loop.book.reset_options(lanes[0]) if len(lanes) == 1 else None,
            timeout_ms=self._reset_ms,
            episode_ids=[lane.episode_id for lane in lanes],
        )
        started = loop.now()
        response = await loop.calls.reset(self.timer, request)
        if not auto:
            await loop.gate.log(
                "info",
                f"env reset complete in {(loop.now() - started) * 1000.0:.0f}ms "
                f"({len(lanes)} episode(s) ready)",
            )
        await loop.announce(lanes)
        return response.observation

    def step_request(self, action: spaces_pb.SpaceValue) -> env_pb.StepRequest:
        return env_pb.StepRequest(
            action=action,
            timeout_ms=self._step_ms,
            episode_ids=[lane.episode_id for lane in self.rows],
        )

    def account(self, response: Answer, took_ms: float, charge: float) -> None:
        rewards = response.rewards
        for k, lane in enumerate(self.rows):
            if lane.rolling:
                lane.rolling = False
                continue
            lane.steps += 1
            lane.predict_ms += charge
            lane.step_ms += took_ms
            if k < len(rewards):
                lane.reward += rewards[k]

    def episode_over(self, ended: bool) -> bool:
        return ended

    async def next_episode(self) -> bool:
        return True


class NextStepVector(WholeEnv):
    """The env resets finished lanes itself: their new ids roll into the next step."""

    fusable = False  # each step request carries the lanes' rolled episode ids

    async def next_episode(self) -> bool:
        rolled = [lane for lane in self.rows if not lane.active]
        for lane in rolled:
            self.loop.book.start(lane, auto=True)
            lane.rolling = True
        await self.loop.announce(rolled)
        return False


class LaneMode:
    """One lane of a subset-stepped vector env: its own resets and step requests."""

    def __init__(self, loop: RouteLoop, lane: Lane, timer: WatchdogTimer) -> None:
        self.loop = loop
        self.lane = lane
        self.rows = (lane,)
        self.fusable = False
        self.timer = timer
        self._indices = [lane.env_index]
        self._step_ms = loop.calls.spec.limits.timeout_ms("env_step_timeout")
        self._reset_ms = loop.calls.spec.limits.timeout_ms("env_reset_timeout")

    async def reset(self) -> spaces_pb.SpaceValue | None:
        """Reset this lane for its next episode; ``None`` when the budget has none left."""
        loop, lane = self.loop, self.lane
        if not lane.active:  # the first episode was claimed by run_lanes
            if not loop.book.may_start():
                return None
            loop.book.start(lane, auto=True)
        response = await loop.calls.reset(
            self.timer,
            env_pb.ResetRequest(
                seeds=[lane.seed] if lane.seed is not None else [],
                options=loop.book.reset_options(lane),
                timeout_ms=self._reset_ms,
                env_indices=self._indices,
                episode_ids=[lane.episode_id],
            ),
        )
        await loop.announce(self.rows)
        return response.observation

    def step_request(self, action: spaces_pb.SpaceValue) -> env_pb.StepRequest:
        return env_pb.StepRequest(
            action=action,
            timeout_ms=self._step_ms,
            env_indices=self._indices,
            episode_ids=[self.lane.episode_id],
        )

    def account(self, response: Answer, took_ms: float, charge: float) -> None:
        lane = self.lane
        # Another lane's task may have truncated this episode while the step was in flight.
        if lane.active:
            lane.steps += 1
            lane.predict_ms += charge
            lane.step_ms += took_ms
            if response.rewards:
                lane.reward += response.rewards[0]

    def episode_over(self, ended: bool) -> bool:
        return not self.lane.active

    async def next_episode(self) -> bool:
        return True


async def run_lanes(loop: RouteLoop, lanes: Sequence[Lane]) -> None:
    """One task per lane, one request per lane in flight, per-lane resets.

    Cancellation: cancelling the caller cancels every lane task.
    Raises:
        Exception: the first lane's route error, bare (it cancels the other lanes).
    """
    # Initial episodes are claimed in lane order, so lane k gets the k-th seed whatever
    # order the lane tasks happen to run in; lanes beyond the budget stay idle.
    book = loop.book
    for lane in lanes:
        if book.may_start():
            book.start(lane, auto=False)
    failures: list[BaseException] = []
    route_id = loop.calls.spec.route_id
    async with trio.open_nursery() as nursery:

        async def lane_task(lane: Lane) -> None:
            timer = WatchdogTimer(route_id, loop.now)
            try:
                async with timer.guard():
                    await loop.drive(LaneMode(loop, lane, timer))
            except Exception as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()

        for lane in lanes:
            if lane.active:
                nursery.start_soon(lane_task, lane)
    if failures:
        raise failures[0]


def block_endpoints(
    loop: RouteLoop, session: Session
) -> tuple[LaneBlockEnv, LaneBlockModel] | None:
    """The route's env and model as a lane block, when the block mode drives it: both
    ready, driver-owned resets, two lanes or more, no observation/action/step hook."""
    env, model = loop.calls.env, loop.calls.model
    if session.num_envs < 2 or not quiet_route(loop, session):
        return None
    if not (isinstance(env, LaneBlockEnv) and env.block_ready):
        return None
    if env.num_lanes != session.num_envs:
        return None
    if not (isinstance(model, LaneBlockModel) and model.block_ready(loop.calls.spec.env_id)):
        return None
    return env, model


async def _drive_block(loop: RouteLoop, env: LaneBlockEnv, model: LaneBlockModel) -> None:
    """The route's own block: one member, its own timer and component names."""
    spec = loop.calls.spec
    timer = WatchdogTimer(spec.route_id, loop.now)
    component = (spec.env_component_id, spec.model_component_id)
    drive = BlockDrive(env, model, timer, spec.limits, component)
    drive.reset_adapters = not isinstance(model, FusableModel) or model.keeps_episode_state
    drive.join(BlockMember(loop, loop.book.lanes))
    async with timer.guard():
        await drive.run()


async def drive_route(loop: RouteLoop, session: Session, fused: FusedSeat | None = None) -> None:
    """Drive the route in the mode its session calls for, until its budget is spent.

    ``fused``: the route's seat in a fused block (routes sharing one in-process
    policy, ``_fused.py``); when the route can take it, the block drives it.

    Cancellation: cancellable at every remote call and hook.
    Raises:
        RlmeshTrioError: the route error that ended it.
    """
    lanes = loop.book.open_lanes(session.num_envs, session.env_owns_resets, session.trial_option)
    if fused is not None and await fused.drive(loop, session, lanes):
        return
    block = block_endpoints(loop, session)
    if block is not None:
        await _drive_block(loop, *block)
        return
    if session.block_only:
        raise InvalidSpec(VECTOR_REFUSED.format(num_envs=session.num_envs))
    if session.lanes:
        await run_lanes(loop, lanes)
        return
    timer = WatchdogTimer(loop.calls.spec.route_id, loop.now)
    mode = NextStepVector if session.env_owns_resets else WholeEnv
    async with timer.guard():
        await loop.drive(mode(loop, lanes, timer))
