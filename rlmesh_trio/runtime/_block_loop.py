"""The block drive mode: one task drives all of a route's lanes as one block of arrays.

Chosen by :func:`~._modes.drive_route` when the env endpoint is a
:class:`~rlmesh_trio._blocks.LaneBlockEnv` and the model a
:class:`~rlmesh_trio._blocks.LaneBlockModel` that are both ``block_ready``,
the runtime owns the resets (autoreset DISABLED), the route has two lanes or
more, and no observation, action or step hook listens (those hooks are
shown one message per step, so such a route takes the general path, at the
cost of one task, one predict and one step request per lane per step).

Per round: one predict over the active lanes' observation rows, one step of
those lanes, then numpy books rewards, steps, ends and the step and time
caps over the arrays. Python runs per lane only where an episode ends (its
:class:`~._results.EpisodeResult`, ``episode_completed``, the ResetAdapter)
or starts (seed and trial claimed in lane order, ``episode_started``); the
lanes that ended in a round are reset in ONE ``reset_lanes`` call. A lane
with no episode left in the budget stays idle (the env side decides what an
idle lane does: a list of envs leaves it alone, a ``VectorEnv`` steps it
with its last action and drops the result).

Each block call has one deadline (``env_reset_timeout``,
``model_predict_timeout``, ``env_step_timeout``) under the loop's
:class:`~._timer.WatchdogTimer`; an overrun is the usual
:class:`OperationTimeout` naming route, component, operation and step.
Telemetry is booked per round (``env.step``/``model.predict`` once a round;
the runtime step advances by the lanes stepped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .._blocks import LaneBlockEnv, LaneBlockModel
from .._errors import ModelRpcError, RlmeshTrioError
from ..spaces import meta_map_from_python
from ._block_member import BlockMember, RoundLog
from ._calls import _env_error, _model_error
from ._episodes import Lane
from ._events import EpisodeCompletedEvent
from ._loop import RouteLoop
from ._meta import SUCCESS_KEYS, TRIAL_INDEX_OPTION
from ._spec import Limits
from ._timer import WatchdogTimer

__all__ = ["BOOK_ROUNDS", "BlockDrive", "success_of"]

#: A route's rounds are booked on its telemetry and runtime step at an episode end
#: once this many have gathered (and when it finishes, fails or leaves).
BOOK_ROUNDS = 64


def success_of(info: Mapping[str, Any] | None) -> bool | None:
    """Success from a final info dict, as ``episode_success`` reads it from a MetaMap."""
    if not info:
        return None
    for key in SUCCESS_KEYS:
        if key not in info:
            continue
        value = info[key]
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if isinstance(value, int | float | np.integer | np.floating):
            return bool(value != 0)
        return None
    return None


class BlockDrive:
    """The arrays and calls of a block of lanes (see the module doc).

    The lanes belong to one route (``drive_route``) or to several (a fused
    block, ``_fused.py``): each route joins as a :class:`BlockMember` and keeps
    its own book, hooks and telemetry. ``component`` names the block's env and
    model in timeouts (a route's own component ids for a one-route block).
    """

    def __init__(
        self,
        env: LaneBlockEnv,
        model: LaneBlockModel,
        timer: WatchdogTimer,
        limits: Limits,
        component: tuple[str, str],
    ) -> None:
        self.env = env
        self.model = model
        self.timer = timer
        self.members: list[BlockMember] = []
        self.lanes: list[Lane] = []
        self.owner = np.zeros(0, dtype=np.intp)
        self.active = np.zeros(0, dtype=bool)
        self.steps = np.zeros(0, dtype=np.int64)
        self.reward = np.zeros(0, dtype=np.float64)
        self.started = np.zeros(0, dtype=np.float64)
        self.predict_ms = np.zeros(0, dtype=np.float64)
        self.step_ms = np.zeros(0, dtype=np.float64)
        self.max_steps = np.zeros(0, dtype=np.int64)
        self.max_seconds = np.zeros(0, dtype=np.float64)
        self.obs: np.ndarray | None = None
        self._timed = False  # a member has a time cap
        self._limits = limits
        self._env_component, self._model_component = component
        self._joining: list[BlockMember] = []
        #: A member left since the last round boundary (its lanes are dropped there).
        self._left = False
        #: Whether each finished episode gets its best-effort ResetAdapter (a model
        #: that keeps no per-episode state has nothing to reset).
        self.reset_adapters = True
        #: The rounds' timings, booked on each route at its episode ends.
        self.log = RoundLog()
        #: Per lane: steps not yet booked on its route's runtime step.
        self.unbooked = np.zeros(0, dtype=np.int64)
        #: The lanes of the block call in flight (or the last one): whose call timed out.
        self.call_lanes = np.zeros(0, dtype=np.intp)

    # ------------------------------------------------------------------ members

    def join(self, member: BlockMember) -> None:
        """Add ``member``'s lanes; their first episodes start before the next round."""
        n = len(member.lanes)
        member.index = len(self.members)
        member.offset = len(self.lanes)
        self.members.append(member)
        self.lanes.extend(member.lanes)
        book = member.book
        seconds = book.max_seconds
        self._timed = self._timed or seconds is not None
        self.owner = np.concatenate([self.owner, np.full(n, member.index, dtype=np.intp)])
        self.max_steps = np.concatenate([self.max_steps, np.full(n, book.max_steps)])
        cap = np.inf if seconds is None else float(seconds)
        self.max_seconds = np.concatenate([self.max_seconds, np.full(n, cap)])
        member.booked = self.log.rounds
        for name in ("active", "steps", "reward", "started", "predict_ms", "step_ms", "unbooked"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.zeros(n, dtype=old.dtype)]))
        if self.obs is not None:
            pad = np.zeros((n, *self.obs.shape[1:]), dtype=self.obs.dtype)
            self.obs = np.concatenate([self.obs, pad])
        self._joining.append(member)

    @property
    def rounds(self) -> int:
        """Rounds driven so far (one predict each)."""
        return self.log.rounds

    def leave(self, member: BlockMember) -> None:
        """Stop driving ``member``'s lanes (its task stopped waiting); safe mid-round."""
        self.book(member)
        member.left = True
        member.finished = True
        self._left = True

    def book(self, member: BlockMember) -> None:
        """Book ``member``'s rounds and steps so far on its route (see :class:`RoundLog`)."""
        if member.finished:
            return
        lanes = slice(member.offset, member.offset + len(member.lanes))
        self.log.book(member, int(self.unbooked[lanes].sum()))
        self.unbooked[lanes] = 0

    async def _booked(self, member: BlockMember) -> None:
        """:meth:`book`, then the route's telemetry window when one is due."""
        self.book(member)
        loop = member.loop
        telemetry = loop.calls.telemetry
        now = loop.now()
        if now >= telemetry.window_deadline:
            await loop.gate.emit_window(telemetry, now)

    def member_of(self, lane: int) -> BlockMember:
        return self.members[int(self.owner[lane])]

    def call_members(self) -> list[BlockMember]:
        """The routes whose lanes are in the block call in flight, in lane order."""
        return [self.members[int(i)] for i in np.unique(self.owner[self.call_lanes])]

    def first_live(self) -> BlockMember | None:
        """The route of the first active lane (else the first unfinished route)."""
        active = np.flatnonzero(self.active)
        if active.size:
            return self.member_of(int(active[0]))
        return next((m for m in self.members if not m.finished), None)

    @property
    def has_work(self) -> bool:
        """Routes waiting to start, or lanes running."""
        return bool(self._joining) or bool(self.active.any())

    async def run(self) -> None:
        """Start the joined routes' first episodes (lane order), then rounds until no lane
        has an episode left in its route's budget.

        Cancellation: cancellable at every block call and hook.
        Raises:
            RlmeshTrioError: the route error of a failed call or hook (its
                ``env_index`` block-wide: see :meth:`member_of`).
        """
        try:
            while True:
                if self._joining:
                    await self._admit()
                self._drop_left()
                active = np.flatnonzero(self.active)
                if not active.size:
                    if self._joining:
                        continue
                    return
                ended = await self._round(active)
                if ended is not None:
                    restart = await self._end(ended)
                    if restart:
                        await self._reset(restart)
        finally:
            for member in self.members:
                self.book(member)

    async def _admit(self) -> None:
        """Claim the joining routes' first episodes in lane order and reset them at once."""
        joining, self._joining = self._joining, []
        claimed: list[int] = []
        for member in joining:
            first = self._claim(range(member.offset, member.offset + len(member.lanes)), False)
            if not first:
                member.finish()
            claimed.extend(first)
        if claimed:
            await self._reset(claimed)

    def _drop_left(self) -> None:
        if not self._left:
            return  # the usual round: no route left (a loop over every member otherwise)
        self._left = False
        for member in self.members:
            if member.left:
                self.active[member.offset : member.offset + len(member.lanes)] = False

    # ------------------------------------------------------------------ starts

    def _claim(self, indices: Any, auto: bool) -> list[int]:
        """Start the next episodes on ``indices`` (in that order) while each route's
        budget allows."""
        lanes, members, owner = self.lanes, self.members, self.owner
        claimed = []
        for k in indices:
            member = members[owner[k]]
            book = member.book
            if member.finished or not book.may_start():
                continue
            book.start(lanes[k], auto)
            claimed.append(k)
        return claimed

    async def _reset(self, claimed: list[int]) -> None:
        """One ``reset_lanes`` for the claimed lanes; their arrays restart; announce them."""
        lanes = [self.lanes[k] for k in claimed]
        owners = [self.members[self.owner[k]] for k in claimed]
        options: list[Mapping[str, Any] | None] = [
            {TRIAL_INDEX_OPTION: lane.trial}
            if member.book.trial_option and lane.trial is not None
            else None
            for lane, member in zip(lanes, owners, strict=True)
        ]
        index = self.call_lanes = np.asarray(claimed, dtype=np.intp)
        timeout = self._limits.env_reset_timeout
        now = owners[0].loop.now
        started = now()
        call = self.env.reset_lanes(
            index,
            [lane.seed for lane in lanes],
            options,
            timeout,
            episode_ids=[lane.episode_id for lane in lanes],
        )
        op, step = "env.reset", owners[0].loop.calls.step
        try:
            with self.timer.limit(self._env_component, op, step, timeout):
                reply = await call
        except Exception as exc:
            raise _env_error(exc, op, step) or exc from exc
        took = (now() - started) * 1000.0
        for member in {id(m): m for m in owners}.values():
            calls = member.loop.calls
            calls.telemetry.add_operation(op, calls.spec.env_component_id, took, reply.telemetry)
        if self.obs is None:
            rows = reply.observations
            self.obs = np.zeros((len(self.lanes), *rows.shape[1:]), dtype=rows.dtype)
        self.obs[index] = reply.observations
        self.active[index] = True
        self.steps[index] = 0
        self.reward[index] = 0.0
        self.predict_ms[index] = 0.0
        self.step_ms[index] = 0.0
        self.started[index] = [lane.started_at for lane in lanes]
        for lane, member in zip(lanes, owners, strict=True):
            await member.loop.announce((lane,))

    # ------------------------------------------------------------------ rounds

    async def _round(self, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any] | None:
        """Predict and step the ``active`` lanes and book the round over the arrays.

        Returns the lanes whose episodes ended (ascending), which of them the env
        ended (the rest hit a runtime cap) and the step's final infos; None when
        none ended.
        """
        assert self.obs is not None
        self.call_lanes = active
        first = self.members[self.owner[active[0]]].loop
        now_fn = first.now
        round_started = now_fn()
        # Any route of the round names the rows: the block's routes share one rows plan,
        # and this one's adapter is surely still resolved.
        env_id = first.calls.spec.env_id
        # Every lane active (the usual round): whole-array slices, not fancy indexing.
        sel: Any = slice(None) if active.size == len(self.lanes) else active
        actions = await self._predict(env_id, self.obs[active], active, first.calls.step)
        predicted = now_fn()
        step = first.calls.step + 1
        op, limit = "env.step", self._limits.env_step_timeout
        call = self.env.step_lanes(active, actions, limit)
        try:
            with self.timer.limit(self._env_component, op, step, limit):
                reply = await call
        except Exception as exc:
            raise _env_error(exc, op, step) or exc from exc
        now = now_fn()
        predict_ms = (predicted - round_started) * 1000.0
        step_ms = (now - predicted) * 1000.0
        self.obs[sel] = reply.observations
        steps = self.steps
        steps[sel] += 1
        self.reward[sel] += reply.rewards
        self.predict_ms[sel] += predict_ms
        self.step_ms[sel] += step_ms
        self.unbooked[sel] += 1
        done = reply.terminated | reply.truncated
        over = done | (steps[sel] >= self.max_steps[sel])
        if self._timed:
            over |= (now - self.started[sel]) >= self.max_seconds[sel]
        log = self.log
        log.add((predict_ms, step_ms, (now - round_started) * 1000.0), reply.telemetry)
        if len(log.predict) >= 4096:
            log.trim(self.members)
        if not over.any():
            return None
        return active[over], done[over], reply

    async def _predict(
        self, env_id: str, rows: np.ndarray, active: np.ndarray, step: int
    ) -> np.ndarray:
        """One ``predict_rows`` under the predict timeout (a row at fault named by its lane)."""
        component = self._model_component
        limit = self._limits.model_predict_timeout
        call = self.model.predict_rows(env_id, rows, limit)
        try:
            with self.timer.limit(component, "model.predict", step, limit):
                return await call
        except Exception as exc:
            error = _model_error(exc, component) or exc
            if isinstance(error, ModelRpcError) and error.env_index is not None:
                lane = int(active[error.env_index]) if error.env_index < len(active) else None
                error = ModelRpcError(
                    component,
                    error.message,
                    code=error.code,
                    recoverable=error.recoverable,
                    env_index=lane,
                )
            raise error from exc

    # ------------------------------------------------------------------ ends

    async def _end(self, ended: tuple[np.ndarray, np.ndarray, Any]) -> list[int]:
        """Finish each ended lane's episode, in lane order, while its route's budget wants
        results; the lanes to start again (their routes' budgets allowing)."""
        indices, by_env, reply = ended
        terminated = reply.terminated
        truncated = reply.truncated
        position = {int(k): row for row, k in enumerate(np.flatnonzero(self.active))}
        touched: dict[int, BlockMember] = {}
        for k, env_ended in zip(indices.tolist(), by_env.tolist(), strict=True):
            member = self.members[self.owner[k]]
            self.active[k] = False
            if member.finished or member.book.budget_spent():
                continue
            touched[member.index] = member
            lane = self.lanes[k]
            lane.steps = int(self.steps[k])
            lane.reward = float(self.reward[k])
            lane.predict_ms = float(self.predict_ms[k])
            lane.step_ms = float(self.step_ms[k])
            final = reply.final_infos.get(k)
            book, loop = member.book, member.loop
            if env_ended:
                row = position[k]
                result = book.finish_as(
                    lane,
                    terminated=bool(terminated[row]),
                    truncated=bool(truncated[row]),
                    success=success_of(final),
                    # The env's timestamps where it sent them (served lanes), as on the
                    # per-lane path; else the runtime's clock.
                    duration=reply.durations.get(k),
                )
            else:
                cap = book.truncation_cap(lane, loop.now())
                local = k - member.offset
                await loop.gate.log(
                    "info", f"truncating episode {lane.episode_id} on env_index {local} at {cap}"
                )
                final = None
                result = book.finish_as(lane, terminated=False, truncated=True, success=None)
            await _completed(loop, result, final, self.reset_adapters)
        rounds = self.log.rounds
        for member in touched.values():
            done = member.book.budget_spent()
            # Booked every BOOK_ROUNDS rounds at most (and at the route's end): a short
            # episode's booking would cost more than its steps.
            if done or rounds - member.booked >= BOOK_ROUNDS:
                await self._booked(member)
            if done:
                self._finish(member)
        return self._claim(indices.tolist(), auto=True)

    def _finish(self, member: BlockMember) -> None:
        """The route's budget is spent: its lanes go idle and its task is told."""
        self.active[member.offset : member.offset + len(member.lanes)] = False
        member.finish()


async def _completed(
    loop: RouteLoop, result: Any, final: Mapping[str, Any] | None, reset_adapter: bool
) -> None:
    """``episode_completed`` (when a hook listens), then the best-effort ResetAdapter."""
    gate = loop.gate
    if gate.completed:
        await gate.emit(
            "episode_completed",
            EpisodeCompletedEvent.of(gate.ctx, result, _meta_map(final)),
        )
    if reset_adapter:
        # The route's background nursery, as RouteLoop._finish uses it (same package).
        loop._background.start_soon(loop._reset_adapter, result.episode_id)


def _meta_map(info: Mapping[str, Any] | None) -> Any:
    """A final info as the event's MetaMap (None when empty or without a wire form)."""
    if not info:
        return None
    try:
        return meta_map_from_python(dict(info))
    except (TypeError, ValueError, RlmeshTrioError):
        return None
