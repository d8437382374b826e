"""One route's part of a lane block: its loop, its lanes, and how its part ends.

A :class:`~._block_loop.BlockDrive` drives the lanes of one or more routes
(a fused block: routes sharing one in-process policy, see ``_fused.py``).
Each route keeps its own :class:`~._episodes.EpisodeBook` (seeds, trials,
budget, caps), its own telemetry and hooks; the drive reaches them through
the route's :class:`BlockMember`.
"""

from __future__ import annotations

import trio

from .._errors import EnvRpcError, ModelRpcError
from ._episodes import Lane
from ._loop import RouteLoop

__all__ = ["BlockMember", "local_error"]


class BlockMember:
    """A route's lanes in a block: global lanes ``offset .. offset + len(lanes) - 1``.

    ``done`` is set once the route's part is over: its budget is spent, or the
    block failed on this route (``error`` holds the route error then).
    """

    __slots__ = (
        "book",
        "done",
        "error",
        "finished",
        "index",
        "lanes",
        "left",
        "loop",
        "offset",
        "predicts",
        "rounds",
        "steps",
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
        calls = loop.calls
        telemetry = calls.telemetry
        self.predicts = telemetry.recorder("model.predict", calls.spec.model_component_id)
        self.steps = telemetry.recorder("env.step", calls.spec.env_component_id)
        self.rounds = telemetry.recorder("runner.round", "runner")

    @property
    def route_id(self) -> str:
        return self.loop.calls.spec.route_id

    def finish(self, error: BaseException | None = None) -> None:
        """End this route's part (with ``error``: the block failed on it)."""
        self.finished = True
        if error is not None and self.error is None:
            self.error = error
        self.done.set()


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
