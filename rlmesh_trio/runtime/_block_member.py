"""One route's part of a lane block: its loop, its lanes, and how its part ends.

A :class:`~._block_loop.BlockDrive` drives the lanes of one or more routes
(a fused block: routes sharing one in-process policy, see ``_fused.py``).
Each route keeps its own :class:`~._episodes.EpisodeBook` (seeds, trials,
budget, caps), its own telemetry and hooks; the drive reaches them through
the route's :class:`BlockMember`.
"""

from __future__ import annotations

from collections.abc import Mapping

import trio

from .._errors import EnvRpcError, ModelRpcError
from ._episodes import Lane
from ._loop import RouteLoop

__all__ = ["BlockMember", "RoundLog", "local_error"]

#: Rounds kept in a :class:`RoundLog` before the ones every route has booked are dropped.
_TRIM_ROUNDS = 4096


class BlockMember:
    """A route's lanes in a block: global lanes ``offset .. offset + len(lanes) - 1``.

    ``done`` is set once the route's part is over: its budget is spent, or the
    block failed on this route (``error`` holds the route error then).
    """

    __slots__ = (
        "book",
        "booked",
        "done",
        "error",
        "finished",
        "index",
        "lanes",
        "left",
        "loop",
        "offset",
    )

    def __init__(self, loop: RouteLoop, lanes: list[Lane]) -> None:
        self.loop = loop
        self.book = loop.book
        self.lanes = lanes
        self.offset = 0
        self.index = 0
        self.done = trio.Event()
        self.error: BaseException | None = None
        #: The route's budget is spent (or it failed): its lanes are never started again.
        self.finished = False
        #: The route's task stopped waiting (cancelled): skip its lanes from now on.
        self.left = False
        #: The block round up to which this route's telemetry is booked.
        self.booked = 0

    @property
    def route_id(self) -> str:
        return self.loop.calls.spec.route_id

    def finish(self, error: BaseException | None = None) -> None:
        """End this route's part (with ``error``: the block failed on it)."""
        self.finished = True
        if error is not None and self.error is None:
            self.error = error
        self.done.set()


class RoundLog:
    """The block's round timings, booked on each route in bulk (see :meth:`book`).

    Booking per route per round would cost per-route Python every round; a
    route instead books every round since its last booking at an episode end
    once ``BOOK_ROUNDS`` have gathered (and when it finishes, fails or
    leaves): one predict, one env step and one round sample per round, as a
    route's own loop books them. So its runtime step (``RouteRun.step``, live
    progress) may lag by that many rounds while it runs, and its window
    events may see a round's samples in a later window.
    """

    def __init__(self) -> None:
        self.start = 0  # the round number of the first kept entry
        self.predict: list[float] = []
        self.step: list[float] = []
        self.round: list[float] = []
        self.endpoint: dict[str, list[float]] = {}

    @property
    def rounds(self) -> int:
        return self.start + len(self.predict)

    def add(self, times: tuple[float, float, float], endpoint: Mapping[str, float]) -> None:
        """One round: predict, step and round milliseconds, and the step's endpoint metrics."""
        predict_ms, step_ms, round_ms = times
        self.predict.append(predict_ms)
        self.step.append(step_ms)
        self.round.append(round_ms)
        for metric, value in endpoint.items():
            if metric != "rpc.total":
                self.endpoint.setdefault(metric, []).append(float(value))

    def book(self, member: BlockMember, steps: int) -> None:
        """Book the rounds since ``member``'s last booking, and ``steps`` runtime steps."""
        first, end = member.booked - self.start, len(self.predict)
        member.booked = self.rounds
        calls = member.loop.calls
        calls.step += steps
        if first >= end:
            return
        telemetry = calls.telemetry
        env, model = calls.spec.env_component_id, calls.spec.model_component_id
        telemetry.extend("model.predict", model, "rpc.total", self.predict[first:end])
        telemetry.extend("env.step", env, "rpc.total", self.step[first:end])
        for metric, values in self.endpoint.items():
            telemetry.extend("env.step", env, metric, values[first:end])
        telemetry.extend("runner.round", "runner", "rpc.total", self.round[first:end])
        telemetry.window_steps += steps
        telemetry.steps_to_fold -= end - first
        if telemetry.steps_to_fold <= 0:
            telemetry.fold()

    def trim(self, members: list[BlockMember]) -> None:
        """Drop the rounds every unfinished route has booked (bounds a long run's memory)."""
        if len(self.predict) < _TRIM_ROUNDS:
            return
        live = [m.booked for m in members if not m.finished]
        cut = (min(live) if live else self.rounds) - self.start
        if cut <= 0:
            return
        for series in (self.predict, self.step, self.round, *self.endpoint.values()):
            del series[:cut]
        self.start += cut


def local_error(exc: BaseException, member: BlockMember, step: int) -> BaseException:
    """``exc`` with its ``env_index`` (a block-wide lane) as the member route's own lane,
    and the member's runtime step."""
    if isinstance(exc, EnvRpcError) and exc.env_index is not None:
        named = EnvRpcError(
            exc.operation,
            step,
            exc.message,
            code=exc.code,
            recoverable=exc.recoverable,
            env_index=exc.env_index - member.offset,
        )
        named.__cause__ = exc.__cause__
        return named
    if isinstance(exc, ModelRpcError) and exc.env_index is not None:
        named_model = ModelRpcError(
            exc.component_id,
            exc.message,
            code=exc.code,
            recoverable=exc.recoverable,
            env_index=exc.env_index - member.offset,
        )
        named_model.__cause__ = exc.__cause__
        return named_model
    return exc
