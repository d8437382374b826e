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
from .._errors import RlmeshTrioError
from ..spaces import meta_map_from_python
from ._calls import _env_error, _model_error
from ._episodes import Lane
from ._events import EpisodeCompletedEvent
from ._loop import RouteLoop
from ._meta import SUCCESS_KEYS, TRIAL_INDEX_OPTION
from ._timer import WatchdogTimer

__all__ = ["BlockDrive", "success_of"]


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
    """The arrays and calls of one route's block of lanes (see the module doc)."""

    def __init__(
        self, loop: RouteLoop, env: LaneBlockEnv, model: LaneBlockModel, timer: WatchdogTimer
    ) -> None:
        self.loop = loop
        self.env = env
        self.model = model
        self.timer = timer
        book = loop.book
        self.book = book
        self.lanes: list[Lane] = book.lanes
        n = len(self.lanes)
        self.active = np.zeros(n, dtype=bool)
        self.steps = np.zeros(n, dtype=np.int64)
        self.reward = np.zeros(n, dtype=np.float64)
        self.started = np.zeros(n, dtype=np.float64)
        self.predict_ms = np.zeros(n, dtype=np.float64)
        self.step_ms = np.zeros(n, dtype=np.float64)
        self.obs: np.ndarray | None = None
        spec = loop.calls.spec
        self._limits = spec.limits
        self._env_id = spec.env_id
        telemetry = loop.calls.telemetry
        self._predicts = telemetry.recorder("model.predict", spec.model_component_id)
        self._steps = telemetry.recorder("env.step", spec.env_component_id)
        self._rounds = telemetry.recorder("runner.round", "runner")

    async def run(self) -> None:
        """Start the first episodes (lane order), then rounds until the budget is spent.

        Cancellation: cancellable at every block call and hook.
        Raises:
            RlmeshTrioError: the route error of a failed call or hook.
        """
        book = self.book
        first = self._claim(range(len(self.lanes)), auto=False)
        if not first:
            return
        await self._reset(first)
        while True:
            active = np.flatnonzero(self.active)
            if not active.size:
                return
            ended = await self._round(active)
            if ended is not None:
                await self._end(ended)
                if book.budget_spent():
                    return
                restart = self._claim(ended[0].tolist(), auto=True)
                if restart:
                    await self._reset(restart)

    # ------------------------------------------------------------------ starts

    def _claim(self, indices: Any, auto: bool) -> list[int]:
        """Start the next episodes on ``indices`` (in that order) while the budget allows."""
        book, lanes = self.book, self.lanes
        claimed = []
        for k in indices:
            if not book.may_start():
                break
            book.start(lanes[k], auto)
            claimed.append(k)
        return claimed

    async def _reset(self, claimed: list[int]) -> None:
        """One ``reset_lanes`` for the claimed lanes; their arrays restart; announce them."""
        loop, book, calls = self.loop, self.book, self.loop.calls
        lanes = [self.lanes[k] for k in claimed]
        trial = book.trial_option
        options: list[Mapping[str, Any] | None] = [
            {TRIAL_INDEX_OPTION: lane.trial} if trial and lane.trial is not None else None
            for lane in lanes
        ]
        index = np.asarray(claimed, dtype=np.intp)
        timeout = self._limits.env_reset_timeout
        started = loop.now()
        call = self.env.reset_lanes(index, [lane.seed for lane in lanes], options, timeout)
        op, step = "env.reset", calls.step
        try:
            with self.timer.limit(calls.spec.env_component_id, op, step, timeout):
                reply = await call
        except Exception as exc:
            raise _env_error(exc, op, step) or exc from exc
        calls.telemetry.add_operation(
            op, calls.spec.env_component_id, (loop.now() - started) * 1000.0, reply.telemetry
        )
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
        await loop.announce(lanes)

    # ------------------------------------------------------------------ rounds

    async def _round(self, active: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any] | None:
        """Predict and step the ``active`` lanes and book the round over the arrays.

        Returns the lanes whose episodes ended (ascending), which of them the env
        ended (the rest hit a runtime cap) and the step's final infos; None when
        none ended.
        """
        loop, calls = self.loop, self.loop.calls
        assert self.obs is not None
        round_started = loop.now()
        actions = await self._predict(self.obs[active])
        predicted = loop.now()
        step = calls.step + 1
        op, limit = "env.step", self._limits.env_step_timeout
        call = self.env.step_lanes(active, actions, limit)
        try:
            with self.timer.limit(calls.spec.env_component_id, op, step, limit):
                reply = await call
        except Exception as exc:
            raise _env_error(exc, op, step) or exc from exc
        now = loop.now()
        predict_ms = (predicted - round_started) * 1000.0
        step_ms = (now - predicted) * 1000.0
        self._book_round(len(active), predict_ms, step_ms, reply.telemetry)
        self.obs[active] = reply.observations
        self.steps[active] += 1
        self.reward[active] += reply.rewards
        self.predict_ms[active] += predict_ms
        self.step_ms[active] += step_ms
        done = reply.terminated | reply.truncated
        over = done | (self.steps[active] >= self.book.max_steps)
        max_seconds = self.book.max_seconds
        if max_seconds is not None:
            over |= (now - self.started[active]) >= max_seconds
        self._rounds.add("rpc.total", (loop.now() - round_started) * 1000.0)
        telemetry = calls.telemetry
        if now >= telemetry.window_deadline:
            await loop.gate.emit_window(telemetry, now)
        if not over.any():
            return None
        return active[over], done[over], reply

    async def _predict(self, rows: np.ndarray) -> np.ndarray:
        """One ``predict_rows`` under the predict timeout; booked as one predict."""
        loop, calls = self.loop, self.loop.calls
        component = calls.spec.model_component_id
        limit = self._limits.model_predict_timeout
        started = loop.now()
        call = self.model.predict_rows(self._env_id, rows, limit)
        try:
            with self.timer.limit(component, "model.predict", calls.step, limit):
                actions = await call
        except Exception as exc:
            raise _model_error(exc, component) or exc from exc
        self._predicts.add("rpc.total", (loop.now() - started) * 1000.0)
        return actions

    def _book_round(
        self, stepped: int, predict_ms: float, step_ms: float, endpoint: Mapping[str, float]
    ) -> None:
        """The round's step telemetry: one env step operation, ``stepped`` runtime steps."""
        calls = self.loop.calls
        calls.step += stepped
        self._steps.operation(step_ms, endpoint)
        telemetry = calls.telemetry
        telemetry.window_steps += stepped
        telemetry.steps_to_fold -= 1
        if telemetry.steps_to_fold <= 0:
            telemetry.fold()

    # ------------------------------------------------------------------ ends

    async def _end(self, ended: tuple[np.ndarray, np.ndarray, Any]) -> None:
        """Finish each ended lane's episode, in lane order, while the budget wants results."""
        indices, by_env, reply = ended
        book, loop = self.book, self.loop
        terminated = reply.terminated
        truncated = reply.truncated
        position = {int(k): row for row, k in enumerate(np.flatnonzero(self.active))}
        for k, env_ended in zip(indices.tolist(), by_env.tolist(), strict=True):
            if book.budget_spent():
                break
            lane = self.lanes[k]
            lane.steps = int(self.steps[k])
            lane.reward = float(self.reward[k])
            lane.predict_ms = float(self.predict_ms[k])
            lane.step_ms = float(self.step_ms[k])
            self.active[k] = False
            final = reply.final_infos.get(k)
            if env_ended:
                row = position[k]
                result = book.finish_as(
                    lane,
                    terminated=bool(terminated[row]),
                    truncated=bool(truncated[row]),
                    success=success_of(final),
                )
            else:
                cap = book.truncation_cap(lane, loop.now())
                await loop.gate.log(
                    "info", f"truncating episode {lane.episode_id} on env_index {k} at {cap}"
                )
                final = None
                result = book.finish_as(lane, terminated=False, truncated=True, success=None)
            await self._completed(result, final)

    async def _completed(self, result: Any, final: Mapping[str, Any] | None) -> None:
        """``episode_completed`` (when a hook listens), then the best-effort ResetAdapter."""
        loop = self.loop
        gate = loop.gate
        if gate.completed:
            await gate.emit(
                "episode_completed",
                EpisodeCompletedEvent(
                    gate.ctx,
                    episode_id=result.episode_id,
                    episode_record_id=result.record_id,
                    episode_index=result.index,
                    env_index=result.env_index,
                    step_count=result.steps,
                    cumulative_reward=result.reward,
                    terminated=result.terminated,
                    truncated=result.truncated,
                    duration_ms=result.duration_s * 1000.0,
                    final_info=_meta_map(final),
                    result=result,
                ),
            )
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
