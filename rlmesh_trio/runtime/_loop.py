"""The route loop: reset, predict, step, record, stop -- the seed's ``run_loop``.

:meth:`RouteLoop.drive` is the loop; a :class:`DriveMode` (``_modes.py``)
says what a reset and a step request are for its shape of env, and how a
step's rewards are booked. Everything a step emits (transforms, events,
telemetry windows, episode results) is done here, in the reference
driver's order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import attrs
import trio

from .._protocol import env_pb, model_pb, spaces_pb
from .._wire._step_parts import StepParts
from ._calls import RouteCalls
from ._episodes import EpisodeBook, Lane
from ._events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    ObservationEmittedEvent,
    StepCompletedEvent,
)
from ._hook_gate import HookGate
from ._telemetry import OperationRecorder
from ._timer import OperationTimer

__all__ = ["DriveMode", "Replay", "RouteLoop"]

#: What a step answers: a message, or (an in-process pair's) the answer's parts.
Answer = env_pb.StepResponse | StepParts
#: What the next predict is of: a message's frame, or (an in-process pair's) its leaves.
Observation = spaces_pb.SpaceValue | list[bytes] | None
#: One round of :meth:`RouteLoop.drive`: (mode, replay, observation, is_reset) to the
#: step's answer, its wall time (ms) and the predict time charged to it.
RoundFn = Callable[
    ["DriveMode", "Replay", Observation, bool], Awaitable[tuple[Answer, float, float]]
]


class Replay:
    """A predict response's action frames, used one per step (execution horizon)."""

    __slots__ = ("charge", "frames", "pos")

    def __init__(self) -> None:
        self.frames: Sequence[spaces_pb.SpaceValue] = ()
        self.pos = 0
        #: The predict wall time (ms) charged to each step a frame serves.
        self.charge = 0.0

    def take(self) -> spaces_pb.SpaceValue | None:
        """The next buffered frame, or ``None`` when the model must be asked again."""
        if self.pos < len(self.frames):
            frame = self.frames[self.pos]
            self.pos += 1
            return frame
        return None

    def load(
        self, frames: Sequence[spaces_pb.SpaceValue], predict_ms: float
    ) -> spaces_pb.SpaceValue:
        """Buffer a fresh predict's frames and hand out the first."""
        self.frames = frames
        self.pos = 1
        self.charge = predict_ms / len(frames)
        return frames[0]

    def flush(self) -> None:
        """Drop the buffered frames (they were planned for episodes that are over)."""
        self.frames = ()
        self.pos = 0


class DriveMode(Protocol):
    """One shape of env: what a reset and a step request are, and how a step is booked."""

    @property
    def timer(self) -> OperationTimer:
        """The task's timer for its reset, predict and step calls."""
        ...

    @property
    def rows(self) -> Sequence[Lane]:
        """The lanes this mode's requests cover, in env-index order."""
        ...

    @property
    def fusable(self) -> bool:
        """Whether an in-process pair may drive this mode trading frame leaves (one
        lane, driver-owned resets: the one-env endpoint's planned step)."""
        ...

    async def reset(self) -> spaces_pb.SpaceValue | None:
        """Start the next episode(s) and return the reset observation; ``None``: stop."""
        ...

    def step_request(self, action: spaces_pb.SpaceValue) -> env_pb.StepRequest:
        """The step request carrying ``action``."""
        ...

    def account(self, response: Answer, took_ms: float, charge: float) -> None:
        """Book a step's rewards and wall times on the episodes it served."""
        ...

    def episode_over(self, ended: bool) -> bool:
        """Whether this mode's episode(s) need a new start after a step (``ended``: any did)."""
        ...

    async def next_episode(self) -> bool:
        """Prepare what follows an episode's end; ``True`` when a reset must follow."""
        ...


@attrs.define(eq=False)
class RouteLoop:
    """The loop's steps for one route: act, step, record, and what each emits.

    ``background`` is the route's nursery for best-effort ResetAdapter calls.
    """

    calls: RouteCalls
    gate: HookGate
    book: EpisodeBook
    _background: trio.Nursery
    _action_space: spaces_pb.SpaceSpec | None
    _observation_space: spaces_pb.SpaceSpec | None
    #: The run's clock (the calls' own).
    now: Callable[[], float] = attrs.field(
        init=False, default=attrs.Factory(lambda self: self.calls.now, takes_self=True)
    )
    _rounds: OperationRecorder = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: self.calls.telemetry.recorder("runner.round", "runner"), takes_self=True
        ),
    )

    async def drive(self, mode: DriveMode) -> None:
        """Reset, then predict -> step -> record until the budget is spent (or ``mode`` stops).

        Cancellation: cancellable at every remote call and hook.
        Raises:
            RlmeshTrioError: the route error of a failed call or transform.
        """
        observation: Observation = await mode.reset()
        if observation is None:
            return
        is_reset = True
        replay = Replay()
        calls, book, gate = self.calls, self.book, self.gate
        # With no observation or action hook, act() is a replayed frame or a predict.
        plain = not (
            gate.transform_observation or gate.observation or gate.transform_action or gate.action
        )
        quiet = not (gate.step or gate.observation)
        steps = self._round_kind(mode, plain, quiet)
        while True:
            round_started = self.now()
            response, took_ms, charge = await steps(mode, replay, observation, is_reset)
            mode.account(response, took_ms, charge)
            if quiet:  # after_step with no step or observation listener: no coroutine
                now = self.now()
                self._rounds.add("rpc.total", (now - round_started) * 1000.0)
                if now >= calls.telemetry.window_deadline:
                    await gate.emit_window(calls.telemetry, now)
            else:
                assert not isinstance(response, StepParts)  # a pair trades leaves only when quiet
                await self.after_step(mode.rows, response, round_started)
            # Most steps end nothing: record()'s coroutine only when it may have work.
            ended = await self.record(response) if self.may_end(response) else False
            if book.budget_spent():
                return
            if mode.episode_over(ended):
                # Buffered frames were planned for episodes that are over.
                replay.flush()
                if await mode.next_episode():
                    observation = await mode.reset()
                    if observation is None:
                        return
                    is_reset = True
                    continue
            observation = (
                response.leaves if isinstance(response, StepParts) else response.observation
            )
            is_reset = False

    def _round_kind(self, mode: DriveMode, plain: bool, quiet: bool) -> RoundFn:
        """How this drive's rounds go (``plain``: no observation or action hook; ``quiet``:
        no step or observation listener). With no hook to show a message to, an
        in-process env steps on frame leaves, and an in-process policy predicts on them."""
        calls = self.calls
        if plain and quiet and mode.fusable:
            if calls.takes_leaves():
                return self._leaves_round
            if calls.env_takes_leaves():
                return self._env_leaves_round
        return self._plain_round if plain else self._round

    async def _round(
        self, mode: DriveMode, replay: Replay, observation: Observation, is_reset: bool
    ) -> tuple[Answer, float, float]:
        """One predict (or replayed frame) and env step, with the observation and action
        hooks: the step's answer, its wall time (ms) and the predict time it is charged."""
        assert not isinstance(observation, list)  # frame leaves come from _leaves_round only
        action = await self.act(mode.timer, mode.rows, observation, is_reset, replay)
        response, took_ms = await self.calls.step_env(mode.timer, mode.step_request(action))
        return response, took_ms, replay.charge

    async def _plain_round(
        self, mode: DriveMode, replay: Replay, observation: Observation, is_reset: bool
    ) -> tuple[Answer, float, float]:
        """:meth:`_round` with no observation or action hook: a replayed frame or a predict,
        done here (a suspended predict has one frame less to resume)."""
        assert not isinstance(observation, list)
        calls, timer = self.calls, mode.timer
        action = replay.take()
        if action is None:
            action = replay.load(*await calls.predict(timer, mode.rows, observation, is_reset))
        response, took_ms = await calls.step_env(timer, mode.step_request(action))
        return response, took_ms, replay.charge

    async def _env_leaves_round(
        self, mode: DriveMode, replay: Replay, observation: Observation, is_reset: bool
    ) -> tuple[Answer, float, float]:
        """:meth:`_plain_round` of an in-process env and any model: the predict is a
        message, the step goes on the action frame's leaves."""
        calls, timer = self.calls, mode.timer
        if isinstance(observation, list):
            observation = spaces_pb.SpaceValue(leaves=observation)
        action = replay.take()
        if action is None:
            action = replay.load(*await calls.predict(timer, mode.rows, observation, is_reset))
        response, took_ms = await calls.step_leaves(timer, action.leaves, mode.step_request)
        return response, took_ms, replay.charge

    async def _leaves_round(
        self, mode: DriveMode, replay: Replay, observation: Observation, is_reset: bool
    ) -> tuple[Answer, float, float]:
        """:meth:`_plain_round` of an in-process pair trading frame leaves (one action per
        predict, so nothing is replayed): the same calls, checks and books, no messages."""
        calls, timer = self.calls, mode.timer
        assert observation is not None  # the session checks every observation is there
        leaves = observation if isinstance(observation, list) else observation.leaves
        action, predict_ms = await calls.predict_leaves(timer, mode.rows, leaves, is_reset)
        response, took_ms = await calls.step_leaves(timer, action, mode.step_request)
        return response, took_ms, predict_ms

    async def act(
        self,
        timer: OperationTimer,
        rows: Sequence[Lane],
        observation: spaces_pb.SpaceValue | None,
        is_reset: bool,
        replay: Replay,
    ) -> spaces_pb.SpaceValue:
        """The action for this step: the observation's transform, a replayed frame or a fresh
        predict, then the action's transform and ``action_received``.

        Raises:
            HookError: a transform failed.
        """
        gate = self.gate
        if gate.transform_observation or (is_reset and gate.observation):
            observation = await self._outgoing_observation(rows, observation, is_reset)
        action = replay.take()
        if action is None:
            action = replay.load(*await self.calls.predict(timer, rows, observation, is_reset))
        if gate.transform_action or gate.action:
            action = await self._outgoing_action(rows, action)
        return action

    def observation_event(
        self, rows: Sequence[Lane], observation: spaces_pb.SpaceValue | None, is_reset: bool
    ) -> ObservationEmittedEvent:
        first = rows[0]
        return ObservationEmittedEvent(
            self.gate.ctx,
            episode_id=first.episode_id,
            episode_record_id=first.record.record_id if first.record else "",
            episode_ids=tuple(r.episode_id for r in rows),
            episode_record_ids=tuple(r.record.record_id if r.record else "" for r in rows),
            env_indices=tuple(r.env_index for r in rows),
            step=self.calls.step,
            env_index=first.env_index,
            is_reset=is_reset,
            num_envs=self.calls.num_envs,
            observation_space=self._observation_space,
            observation=observation,
        )

    async def _outgoing_observation(
        self, rows: Sequence[Lane], observation: spaces_pb.SpaceValue | None, is_reset: bool
    ) -> spaces_pb.SpaceValue | None:
        """transform_observation (fatal), then observation_emitted for reset observations.

        Step observations are emitted right after their step (untransformed), as
        the reference driver does.
        """
        gate = self.gate
        event = self.observation_event(rows, observation, is_reset)
        if gate.transform_observation:
            started = self.now()
            changed = await gate.transform("transform_observation", event)
            self.calls.telemetry.add(
                "runner.transform_observation",
                "runner",
                "rpc.total",
                (self.now() - started) * 1000.0,
            )
            if changed is not None:
                observation = changed
                event = attrs.evolve(event, observation=changed)
        if is_reset and gate.observation:
            await gate.emit("observation_emitted", event)
        return observation

    async def _outgoing_action(
        self, rows: Sequence[Lane], action: spaces_pb.SpaceValue
    ) -> spaces_pb.SpaceValue:
        gate = self.gate
        first = rows[0]
        event = ActionReceivedEvent(
            gate.ctx,
            episode_id=first.episode_id,
            episode_record_id=first.record.record_id if first.record else "",
            episode_ids=tuple(r.episode_id for r in rows),
            episode_record_ids=tuple(r.record.record_id if r.record else "" for r in rows),
            env_indices=tuple(r.env_index for r in rows),
            step=self.calls.step + 1,
            env_index=first.env_index,
            action_space=self._action_space,
            action=action,
        )
        if gate.transform_action:
            started = self.now()
            changed = await gate.transform("transform_action", event)
            self.calls.telemetry.add(
                "runner.transform_action", "runner", "rpc.total", (self.now() - started) * 1000.0
            )
            if changed is not None:
                action = changed
                event = attrs.evolve(event, action=changed)
        if gate.action:
            await gate.emit("action_received", event)
        return action

    async def after_step(
        self, rows: Sequence[Lane], response: env_pb.StepResponse, round_started: float
    ) -> None:
        """Telemetry, step_completed, the telemetry window, observation_emitted."""
        now = self.now()
        gate = self.gate
        telemetry = self.calls.telemetry
        self._rounds.add("rpc.total", (now - round_started) * 1000.0)
        if gate.step:
            first = rows[0]
            await gate.emit(
                "step_completed",
                StepCompletedEvent(
                    gate.ctx,
                    episode_id=first.episode_id,
                    episode_record_id=first.record.record_id if first.record else "",
                    step=self.calls.step,
                    env_index=first.env_index,
                    env_indices=tuple(r.env_index for r in rows),
                    rewards=tuple(response.rewards),
                ),
            )
        if now >= telemetry.window_deadline:
            await gate.emit_window(telemetry, now)
        if gate.observation:
            await gate.emit(
                "observation_emitted", self.observation_event(rows, response.observation, False)
            )

    async def announce(self, lanes: Sequence[Lane]) -> None:
        """``episode_started`` for each of ``lanes``' new episodes."""
        gate = self.gate
        if not gate.started:
            return
        for lane in lanes:
            record = lane.record
            assert record is not None
            await gate.emit(
                "episode_started",
                EpisodeStartedEvent(
                    gate.ctx,
                    episode_id=record.episode_id,
                    episode_record_id=record.record_id,
                    episode_index=record.index,
                    env_index=record.env_index,
                    seed=record.seed,
                    started_from_auto_reset=record.started_from_auto_reset,
                ),
            )

    def may_end(self, response: Answer) -> bool:
        """False when :meth:`record` would surely find nothing to do (no completion, no
        lane at a runtime cap); True when it may (it then decides)."""
        if response.completed_episodes:
            return True
        book = self.book
        if book.env_owns_resets:
            return False
        now = self.now() if book.max_seconds is not None else 0.0
        for lane in book.lanes:  # a loop, not any(): no generator per step
            if lane.active and book.truncation_cap(lane, now) is not None:
                return True
        return False

    async def record(self, response: Answer) -> bool:
        """Match the step's completions to our episodes; then runtime truncation. Any ended?"""
        ended = False
        book = self.book
        for meta in response.completed_episodes:
            if book.budget_spent():
                break
            lane = book.claim(meta)
            if lane is None:
                await self.gate.log(
                    "debug",
                    f"dropping a stale env-reported episode completion "
                    f"(episode_id={meta.episode_id!r}, env_index={meta.env_index})",
                )
                continue
            await self._finish(lane, meta)
            ended = True
        if not book.env_owns_resets:
            now = self.now() if book.max_seconds is not None else 0.0
            for lane in book.lanes:
                if not lane.active or book.budget_spent():
                    continue
                cap = book.truncation_cap(lane, now)
                if cap is None:
                    continue
                await self.gate.log(
                    "info",
                    f"truncating episode {lane.episode_id} on env_index {lane.env_index} at {cap}",
                )
                await self._finish(lane, None)
                ended = True
        return ended

    async def _finish(self, lane: Lane, meta: env_pb.EpisodeMetadata | None) -> None:
        """Book the episode's result, emit ``episode_completed``, reset the model's adapter."""
        result = self.book.finish(lane, meta)
        gate = self.gate
        if gate.completed:
            await gate.emit(
                "episode_completed",
                EpisodeCompletedEvent.of(
                    gate.ctx, result, meta.final_info if meta is not None else None
                ),
            )
        self._background.start_soon(self._reset_adapter, result.episode_id)

    async def _reset_adapter(self, episode_id: str) -> None:
        """Best-effort ResetAdapter for a finished episode (runs in the route's nursery).

        Cancellation: cancelled with the route's background nursery; bounded by
        the predict timeout; failures are logged only.
        """
        calls = self.calls
        request = model_pb.ResetAdapterRequest(
            context=calls.context("reset_adapter"), episode_ids=[episode_id]
        )
        timeout = calls.spec.limits.model_predict_timeout
        started = self.now()
        try:
            with trio.move_on_after(timeout) as scope:
                await calls.model.reset_adapter(request)
            if scope.cancelled_caught:
                await self.gate.log("warning", f"model reset_adapter timed out after {timeout}s")
            else:
                calls.telemetry.add(
                    "model.reset_adapter",
                    calls.spec.model_component_id,
                    "rpc.total",
                    (self.now() - started) * 1000.0,
                )
        except Exception as exc:
            await self.gate.log("warning", f"model reset_adapter failed (ignored): {exc}")
