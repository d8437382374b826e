"""One signal policy, shared by the servers and the orchestrator.

- A server stops gracefully on the first SIGINT or SIGTERM (:data:`SERVER_SIGNALS`).
- A run is interrupted by SIGINT (:data:`RUN_SIGNALS`): every route is cancelled
  with a reason saying so and the partial report is kept.
- Handlers are installed only while serving or running, only from the main
  thread, and the previous handlers come back afterwards; importing the
  package installs nothing.

Under Trio use :func:`wait_for_signal`; code that runs without Trio (a
blocking server on the main thread) uses :func:`on_first_signal`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import trio

__all__ = [
    "RUN_SIGNALS",
    "SERVER_SIGNALS",
    "describe_signal",
    "on_first_signal",
    "wait_for_signal",
]

SERVER_SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)
RUN_SIGNALS: tuple[int, ...] = (signal.SIGINT,)


def describe_signal(signum: int) -> str:
    """``"signal SIGTERM"``: how a shutdown reason names a signal."""
    return f"signal {signal.Signals(signum).name}"


async def wait_for_signal(signums: Sequence[int]) -> int:
    """Wait under Trio until one of ``signums`` arrives and return it.

    Cancellation: cancellable; the handlers are removed on the way out.
    Raises:
        RuntimeError: when not called from the main thread (Trio's rule).
    """
    with trio.open_signal_receiver(*signums) as signals:
        async for signum in signals:
            return int(signum)
    raise AssertionError("signal receiver ended")  # pragma: no cover - trio never ends it


@contextmanager
def on_first_signal(signums: Sequence[int], callback: Callable[[int], None]) -> Iterator[None]:
    """Without Trio: call ``callback(signum)`` on the first of ``signums``, then restore
    the previous handlers (a second Ctrl+C acts as it did before). A no-op off the
    main thread, where Python cannot install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in signums}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def handler(signum: int, _frame: Any) -> None:
        restore()
        callback(signum)

    for signum in signums:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        restore()
