"""The hooks a route run puts around one driver session.

:class:`TicketHook` maps the session's episodes (start order) to their
tickets and records each finished one (the ledger write happens there, before
any checkpoint). :class:`SessionsAsOne` wraps the caller's hooks so that a
route run over several sessions (retries, dynamic chunks) looks like one
session with the ticket's episode indices.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import attrs
import trio

from ..runtime._events import (
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    RouteContext,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from ..runtime._hooks import HookChain, RuntimeHooks
from ..runtime._results import EpisodeResult, record_id
from ._plan import Ticket

__all__ = ["SessionsAsOne", "TicketHook"]

log = logging.getLogger("rlmesh_trio.orchestrator")


class TicketHook(RuntimeHooks):
    """Maps one session's episodes (start order) to its tickets and records each finished one."""

    def __init__(
        self,
        tickets: Sequence[Ticket],
        record: Callable[[Ticket, EpisodeResult], None],
        on_first_start: Callable[[], None] | None = None,
    ) -> None:
        self.tickets = tickets
        self.record = record
        #: Called once, as the session's first episode starts (setup is done by then).
        self.on_first_start = on_first_start
        self.started: set[int] = set()
        #: Session-local episode index -> the ticket its finished episode was recorded as.
        self.assigned: dict[int, Ticket] = {}
        self._used: set[int] = set()

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        self.started.add(event.episode_index)
        first, self.on_first_start = self.on_first_start, None
        if first is not None:
            first()

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        # No checkpoint before record(): the episode is written before anything can cancel us.
        index = event.episode_index
        self.started.discard(index)
        if index >= len(self.tickets) or index in self._used:
            # An env that owns its resets (no seeds) may finish an episode it started past
            # the budget first: it takes the first ticket still free.
            index = next((i for i in range(len(self.tickets)) if i not in self._used), -1)
            if index < 0:
                return
        self._used.add(index)
        self.assigned[event.episode_index] = self.tickets[index]
        self.record(self.tickets[index], event.result)


class SessionsAsOne(HookChain):
    """The caller's hooks see a route's sessions as one session.

    Only the first ``session_started`` passes; ``session_ended`` /
    ``session_failed`` are held back and :meth:`flush` sends the last one
    (with the whole route's totals) when the route is over, so a retried or
    chunked route does not look ended (or failed) to a progress bar halfway.
    Episode events carry the ticket's episode index (and the recorded result,
    with its ``attempts``), as the report does, not the session's start order.
    """

    def __init__(self, hooks: RuntimeHooks, results: Mapping[int, EpisodeResult]) -> None:
        super().__init__([hooks])
        self._started = False
        self._end: SessionEndedEvent | SessionFailedEvent | None = None
        self._results = results
        #: The running session's ticket hook (``None``: an unplanned route, events as they are).
        self.session: TicketHook | None = None
        self._route: RouteContext | None = None

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        session = self.session
        if session is not None and event.episode_index < len(session.tickets):
            index = session.tickets[event.episode_index].index
            event = attrs.evolve(event, episode_index=index, episode_record_id=record_id(index))
        await super().episode_started(event)

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        session = self.session
        ticket = session.assigned.get(event.episode_index) if session is not None else None
        result = self._results.get(ticket.index) if ticket is not None else None
        if result is not None:
            event = attrs.evolve(
                event,
                episode_index=result.index,
                episode_record_id=result.record_id,
                result=result,
            )
        await super().episode_completed(event)

    async def session_started(self, event: SessionStartedEvent) -> None:
        self._route = event.route
        if not self._started:
            self._started = True
            await super().session_started(event)

    async def session_ended(self, event: SessionEndedEvent) -> None:
        self._end = event

    async def session_failed(self, event: SessionFailedEvent) -> None:
        self._route = event.route
        self._end = event

    async def retrying(self, message: str) -> None:
        """Tell the caller's hooks the route will retry: a ``log`` event, ``source="retry"``.

        Best-effort, as every event: a failing hook is logged.
        """
        if self._route is None:
            return
        try:
            await super().log(LogEvent(self._route, "warning", message, source="retry"))
        except Exception as exc:
            log.warning("route %s: runtime hook failed: %s", self._route.route_id, exc)

    async def flush(self, total_steps: int, total_episodes: int, timeout: float) -> None:
        """Send the held end event (shielded, bounded by ``timeout``; failures are logged)."""
        end, self._end = self._end, None
        if end is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(timeout):
            try:
                if isinstance(end, SessionEndedEvent):
                    end = attrs.evolve(end, total_steps=total_steps, total_episodes=total_episodes)
                    await super().session_ended(end)
                else:
                    await super().session_failed(end)
            except Exception as exc:  # event hooks are best-effort, as in the driver
                log.warning("route %s: runtime hook failed: %s", end.route_id, exc)
