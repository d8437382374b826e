"""Checks at the entry points: each names the call that fits the caller's event loop.

Without them, ``run_routes`` awaited under asyncio ends in a
``TrioInternalError``, and ``run`` inside a running loop says only
"Attempted to call run() from inside a run()".

The caller's library is read with ``sniffio`` (which Trio and asyncio both
answer to) rather than from ``trio.lowlevel.current_trio_token()``: under
trio-asyncio's loop an asyncio coroutine runs inside a Trio run, so a Trio
token exists there although the caller is asyncio code. (sniffio also
keeps asyncio itself out of this module, as out of every module of the
package: clients and servers alike run on Trio.)
"""

from __future__ import annotations

import sniffio

from .._errors import WrongEventLoop

__all__ = ["caller_library", "require_no_running_loop", "require_trio_run"]

FROM_ASYNCIO = "from asyncio use `await asyncio.to_thread(rt.run, ...)`"


def caller_library() -> str | None:
    """``"trio"``, ``"asyncio"`` (or another library's name), or ``None`` outside any loop."""
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


def require_trio_run() -> None:
    """Raise unless the caller (``run_routes``) is a Trio task.

    Raises:
        WrongEventLoop: awaited from asyncio or another library.
    """
    if caller_library() != "trio":
        raise WrongEventLoop(f"run_routes must run under Trio; {FROM_ASYNCIO}")


def require_no_running_loop() -> None:
    """Raise if the caller (``run``) is inside a running Trio run or asyncio loop.

    Raises:
        WrongEventLoop: naming ``await rt.run_routes(...)`` inside Trio, and
            ``asyncio.to_thread`` inside asyncio.
    """
    library = caller_library()
    if library == "trio":
        raise WrongEventLoop(
            "rt.run was called inside a running Trio run; there use `await rt.run_routes(...)`"
        )
    if library is not None:
        raise WrongEventLoop(
            f"rt.run was called inside a running {library} event loop, which it would block; "
            + FROM_ASYNCIO
        )
