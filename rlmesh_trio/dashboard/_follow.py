"""Watch a run through its ledger: follow the file as another process appends to it.

The follower reads only the bytes added since its last look (``tail -f``
style, every :data:`POLL` seconds) and parses each complete line with the
ledger's own record parser; a torn last line stays buffered until the
writer completes it (or a resume cuts it off: the file shrinks and the
follower drops it). Route ends come from the ledger's ``route`` lines
(written by ``rlmesh-trio run --ledger``). When every planned route has
ended, the final report is rebuilt from the ledger: its figures replace the
returns panel's, then the report itself is shown.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ..orchestrator._durable import load_ledger
from ..orchestrator._ledger import (
    LedgerError,
    check_header,
    check_ledger_place,
    ledger_record,
    not_a_header,
)
from ..report import RouteStatus
from ._hook import check_address
from ._hub import Hub
from ._state import DashboardState

__all__ = ["POLL", "LedgerFollower", "watch_ledger"]

log = logging.getLogger("rlmesh_trio.dashboard")

#: How often the ledger is looked at for new lines.
POLL = 0.25
#: The most read in one look (a huge ledger is caught up over several).
CHUNK = 4 << 20
_ENDED: dict[str, RouteStatus] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


def _timestamp(iso: Any) -> float | None:
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def _first_line(handle: Any) -> bytes:
    """The file's first line, however long a header it is (what there is of it so far);
    just its first ``CHUNK`` bytes when those do not start as a header could."""
    data: bytes = handle.readline(CHUNK)
    if data.startswith(b"{") and not data.endswith(b"\n"):
        data += handle.readline()
    return data


class LedgerFollower:
    """Feeds a :class:`DashboardState` from a growing ledger file."""

    def __init__(self, path: str | os.PathLike[str], state: DashboardState) -> None:
        self.path = Path(path)
        self.state = state
        self.offset = 0
        self._buffer = b""
        self._header: dict[str, Any] | None = None
        self._planned: dict[str, int | None] = {}
        self._done: dict[str, int] = {}
        self._ended: dict[str, tuple[str, str]] = {}
        self._warned = False

    @property
    def run_over(self) -> bool:
        """Every planned route has ended (by a ``route`` line or its full budget)."""
        if not self._planned:
            return False
        return all(rid in self._ended for rid in self._planned)

    @property
    def route_ends(self) -> dict[str, tuple[str, str]]:
        return dict(self._ended)

    def poll(self) -> int:
        """Read what was appended since the last call; returns the lines taken in.

        Raises:
            LedgerError: the first line is not a ledger header (or, unfinished,
                does not start as one); the path cannot be read.
        """
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise LedgerError(str(self.path), f"cannot read: {exc.strerror or exc}") from None
        taken = 0
        if self._header is None:
            # Until the header is whole, read it from the start each time: a resume
            # may have cut a torn header and written a new one since.
            self.offset, self._buffer = 0, b""
            taken = self._take(_first_line, size)
            if self._header is None:
                if self._buffer:
                    self._check_start(self._buffer)
                return taken
        if size < self.offset:  # a resume cut off a torn last line
            self.offset, self._buffer = size, b""
        return taken + self._take(lambda handle: handle.read(CHUNK), size)

    def _take(self, read: Callable[[Any], bytes], size: int) -> int:
        """Read from :attr:`offset` with ``read`` and take in the complete lines."""
        if size <= self.offset:
            return 0
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = read(handle)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise LedgerError(str(self.path), f"cannot read: {exc.strerror or exc}") from None
        self.offset += len(data)
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for raw in lines:
            self._line(raw)
        return len(lines)

    @property
    def has_header(self) -> bool:
        """The ledger's header line was read (a run has started writing it)."""
        return self._header is not None

    def _check_start(self, start: bytes) -> None:
        """Refuse an unfinished first line that cannot become a ledger header.

        The writer puts each line down in one ``write``, its header first, as a
        JSON object: a first line still without its newline is one being
        written (or torn) only if it starts as one. A one-line file without a
        final newline that parses whole is judged as it is.
        """
        if not start.startswith(b"{"):
            raise not_a_header(str(self.path), start)
        try:
            record = json.loads(start)
        except ValueError:
            return  # an object still being written
        check_header(str(self.path), record, start)

    def _line(self, raw: bytes) -> None:
        if self._header is None:
            try:
                record = json.loads(raw)
            except ValueError:
                raise not_a_header(str(self.path), raw) from None
            self._take_header(record, raw)
            return
        try:
            record = json.loads(raw)
        except ValueError:
            self._warn("a line that is not JSON")
            return
        try:
            kind, value = ledger_record(record)
        except (KeyError, TypeError, ValueError) as exc:
            self._warn(f"a record it cannot read ({exc})")
            return
        if kind == "episode":
            self._episode(value)
        elif kind == "route":
            self._route_end(value["route_id"], value["status"], value["error"])
        elif kind == "resume":  # a resumed run starts its routes again
            self._ended.clear()

    def _warn(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("ledger %s: skipping %s (further ones not logged)", self.path, what)

    def _take_header(self, record: Any, raw: bytes) -> None:
        self._header = dict(check_header(str(self.path), record, raw))
        title = f"rlmesh-trio watch: {self.path.name}"
        self.state.title = title
        started = _timestamp(self._header.get("started_at"))
        if started is not None:
            self.state.restart_clock(started)
        routes = self._header.get("plan", {}).get("routes", [])
        self._planned = {str(r.get("route_id")): r.get("episodes") for r in routes}
        self.state.plan(self._planned.items())

    def _episode(self, entry: Any) -> None:
        owner = entry.ticket.rsplit("/", 1)[0]
        route_id = owner if owner in self._planned else entry.route_id
        self.state.episode(
            route_id,
            entry.result.reward,
            entry.result.steps,
            at=entry.finished_at,
            started=entry.started_at,
        )
        self._done[route_id] = done = self._done.get(route_id, 0) + 1
        planned = self._planned.get(route_id)
        if planned is not None and done >= planned and route_id not in self._ended:
            self._route_end(route_id, "completed", "")

    def _route_end(self, route_id: str, status: str, error: str) -> None:
        self._ended[route_id] = (status, error)
        self.state.ended_route(route_id, status, error)


def final_report(path: Path, ends: dict[str, tuple[str, str]]) -> Any:
    """The run's report from its ledger, each route with the status and error it ended with."""
    from ..report._decode import RecordedError

    report = load_ledger(path)
    outcomes = []
    for outcome in report.routes:
        status, error = ends.get(outcome.route_id, (outcome.status, ""))
        if status in _ENDED:
            recorded = RecordedError(error) if error else None
            outcome = attrs.evolve(outcome, status=_ENDED[status], error=recorded)
        outcomes.append(outcome)
    return attrs.evolve(report, routes=tuple(outcomes))


async def _follow(follower: LedgerFollower, hub: Hub) -> None:
    """Follow until the run is over, then show the final report (the server keeps serving)."""
    from ..results import render_html

    while True:
        await trio.to_thread.run_sync(follower.poll)
        if follower.run_over:
            await trio.to_thread.run_sync(follower.poll)  # whatever was written last
            break
        await trio.sleep(POLL)
    try:
        report = await trio.to_thread.run_sync(final_report, follower.path, follower.route_ends)
    except (LedgerError, OSError) as exc:
        log.warning("ledger %s: no final report: %s", follower.path, exc)
        report = None
    # The returns panel shows the whole run's figures from now on (the report's, when there
    # is one), not the last periodic computation's.
    await trio.to_thread.run_sync(hub.final_statistics, report)
    follower.state.run_ended()
    if report is None:
        return
    try:
        page = await trio.to_thread.run_sync(
            lambda: render_html(report, title=follower.state.title)
        )
    except (LedgerError, OSError) as exc:
        log.warning("ledger %s: no final report: %s", follower.path, exc)
        return
    hub.set_report(page)


async def watch_ledger(
    path: str | os.PathLike[str],
    *,
    address: str | None = None,
    token: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the live page for the run writing ledger ``path`` until cancelled.

    ``task_status`` receives the page's URL. The file may not exist yet, or be
    empty (a run is about to write its header): the page waits for it. What
    the file holds is checked before the page is served, and again as it
    grows: a first line that is not a ledger header ends the watch.

    Cancellation: cancelling stops the server and the follower.

    Raises:
        InvalidSpec: a bad address, or beyond loopback without a token.
        DashboardUnavailable: the extra is missing. OSError: the address cannot be bound.
        LedgerError: the path's folder does not exist, the path is a folder, or
            the file's first line is not a ledger header (before serving, or later).
    """
    from ._server import serve

    host, port = check_address(address, token)
    check_ledger_place(path)
    state = DashboardState(f"rlmesh-trio watch: {Path(path).name}", clock=_wall_clock)
    hub = Hub(state, token=token)
    follower = LedgerFollower(path, state)
    await trio.to_thread.run_sync(follower.poll)  # not a ledger: refused before serving
    stopping = trio.Event()
    await serve(
        hub,
        host,
        port,
        stopping,
        feeders=[lambda: _follow(follower, hub)],
        task_status=task_status,
    )


def _wall_clock() -> float:
    # Ledger times are wall-clock seconds (time.time()), so the watcher's clock is too.
    return datetime.datetime.now(datetime.UTC).timestamp()
