"""Waiting for a thread or a process to end, on the thing's own end (a join), not a poll."""

from __future__ import annotations

import functools
import subprocess
import threading
import time
from collections.abc import Collection

import trio

__all__ = ["process_ended", "threads_ended"]


async def threads_ended(names: Collection[str], timeout: float) -> bool:
    """Join every live thread named in ``names`` (from a worker thread), for at most
    ``timeout`` seconds in all; ``True`` once none of them is left.

    Cancellation: abandons the join; the thread itself is untouched.
    """
    deadline = time.monotonic() + timeout
    for thread in [t for t in threading.enumerate() if t.name in names]:
        left = max(0.0, deadline - time.monotonic())
        await trio.to_thread.run_sync(thread.join, left, abandon_on_cancel=True)
    return not any(t.name in names for t in threading.enumerate())


async def process_ended(process: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait (from a worker thread) for ``process`` to exit; its return code.

    Raises:
        subprocess.TimeoutExpired: it was still running after ``timeout`` seconds.
    Cancellation: abandons the wait; the process is untouched.
    """
    wait = functools.partial(process.wait, timeout=timeout)
    return await trio.to_thread.run_sync(wait, abandon_on_cancel=True)
