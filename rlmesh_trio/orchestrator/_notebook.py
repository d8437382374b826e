"""``rt.run`` from a notebook cell: the run goes to a worker thread and the cell blocks on it.

A Jupyter kernel runs each cell inside its running asyncio loop, where
``trio.run`` must not take over the thread. A notebook user expects the cell
to block until the results are in, so there (and only there: an IPython
shell is active) the run is started on a worker thread of its own and the
cell waits for it. A plain asyncio program is still refused (see
:func:`~rlmesh_trio.orchestrator._entry.require_no_running_loop`): blocking its
loop would stall every other task in it, which no one asked for.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import trio

from ._entry import caller_library

__all__ = ["in_notebook", "run_on_worker_thread"]


def in_notebook() -> bool:
    """Whether the caller is notebook code: in a running asyncio loop, with an IPython shell
    (a Jupyter kernel's) active. IPython is never imported here: no shell without it."""
    if caller_library() != "asyncio":
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    return callable(get_ipython) and get_ipython() is not None


def run_on_worker_thread(orchestrator: Any, interrupt_reason: str) -> tuple[Any, bool]:
    """Run ``orchestrator`` in a Trio run on a new thread; block until it ends.

    Returns ``(report, interrupted)``. A ``KeyboardInterrupt`` in the waiting
    thread (the notebook's "interrupt kernel") cancels every route with
    ``interrupt_reason``; the wait goes on through their bounded cleanup, so the
    partial report comes back with ``interrupted`` set.

    Raises:
        Whatever the run raised (``RunFailed``, ``InvalidSpec``, ...), in this thread.
    """
    tokens: list[trio.lowlevel.TrioToken] = []
    started = threading.Event()
    outcome: dict[str, Any] = {}

    async def main() -> Any:
        tokens.append(trio.lowlevel.current_trio_token())
        started.set()
        return await orchestrator.run()

    def work() -> None:
        try:
            outcome["report"] = trio.run(main)
        except BaseException as exc:  # handed to the waiting thread, raised there
            outcome["error"] = exc
        finally:
            started.set()
            done.set()

    # An Event, not Thread.join: a join interrupted by KeyboardInterrupt can leave
    # is_alive() false while the thread still runs (CPython before 3.13).
    done = threading.Event()
    threading.Thread(target=work, name="rlmesh-trio-run", daemon=True).start()
    interrupted = False
    while not done.is_set():
        try:
            done.wait()
        except KeyboardInterrupt:
            interrupted = True
            started.wait()
            if tokens:
                _cancel(tokens[0], orchestrator, interrupt_reason)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["report"], interrupted


def _cancel(token: trio.lowlevel.TrioToken, orchestrator: Any, reason: str) -> None:
    try:
        trio.from_thread.run_sync(orchestrator.cancel, reason, trio_token=token)
    except trio.RunFinishedError:
        pass  # it ended meanwhile: nothing left to cancel
