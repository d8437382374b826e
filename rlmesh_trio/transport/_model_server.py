"""``ModelServer``: a Python policy served over gRPC (rlmesh-wire-v1 ``ModelService``).

The protocol logic lives in :class:`~rlmesh_trio._modelhost.ModelHost`; the
gRPC service and its Join streams are in :mod:`._model_join`. The server runs
on a plain asyncio loop of the serving thread (the caller's for
:meth:`ModelServer.serve`, a thread of its own for ``serve_model``,
``server.run`` and ``start()``). A sync policy (not ``threaded``) is called
inline on that loop. Policy calls that must happen in Trio (async policies,
worker threads) go to a Trio guest run hosted by the same loop
(:func:`._server_loop.trio_guest`), whose results come back through an
asyncio future; both share one thread, so neither hand-off blocks. The gRPC
health service (``""`` is SERVING), 256 MiB message limits, an optional bearer
token and an optional TLS context.
"""

from __future__ import annotations

import logging
import ssl as ssl_module
from collections.abc import Callable, Iterable
from typing import Any

from .._modelhost import Invoke, ModelHost, PolicyFn, ThreadedInvoker, inline_invoke
from .._wire import WORKFLOW_EDITION
from . import _server_loop as aio
from ._model_join import ModelService
from ._server_base import ServerBase

__all__ = ["ModelServer"]

log = logging.getLogger("rlmesh_trio.transport.model_server")

DEFAULT_MAX_CONCURRENCY = 32
DRAIN_TIMEOUT = 5.0


class ModelServer(ServerBase):
    """Serve ``policy`` on ``address`` over gRPC.

    ``policy`` is anything :func:`rlmesh_trio.policy` accepts. Sync policies
    run inline on the server's event loop unless ``threaded=True`` (then in a
    Trio worker thread, one call at a time); async policies run as Trio tasks.

    Ways to run it: blocking :meth:`serve`; ``start()`` / ``wait()`` /
    ``shutdown()`` or ``with ModelServer(policy) as server:`` from code that is
    not Trio; ``async with serve_model(policy, address)`` or ``await
    nursery.start(server.run)`` inside Trio (a thread of its own).

    Raises:
        ValueError: ``max_concurrency`` below 1.
        InvalidSpec: a bad ``address``.
    """

    kind = "model"

    def __init__(
        self,
        policy: Any,
        address: str = "127.0.0.1:0",
        *,
        token: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        allow_remote_shutdown: bool = False,
        threaded: bool = False,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        editions: Iterable[str] = (WORKFLOW_EDITION,),
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        super().__init__(address, token=token, ssl=ssl, allow_remote_shutdown=allow_remote_shutdown)
        self.host = (
            policy if isinstance(policy, ModelHost) else ModelHost(policy, editions=editions)
        )
        self.threaded = threaded
        self.max_concurrency = max_concurrency
        # Two statements, not a conditional expression: older mypy joins its arms to object.
        self._invoke_in_trio: Invoke = inline_invoke
        if threaded:
            self._invoke_in_trio = ThreadedInvoker()
        self._guest: aio.TrioGuest | None = None  # async and threaded policies run here

    @property
    def inline(self) -> bool:
        """True when every request can be answered inline, without a Trio hop."""
        return not self.threaded and not self.host.policy.is_async

    def close_bound(self) -> float:
        """Stopping cancels in-flight requests and closes connections, bounded."""
        return DRAIN_TIMEOUT

    # -- ways to run -----------------------------------------------------------------------

    def serve(self, ready_fd: int | None = None, *, announce_as: str | None = None) -> None:
        """Serve until SIGINT/SIGTERM or an accepted remote Shutdown (blocking).

        With ``ready_fd``, writes one line with the bound address
        (``tcp://127.0.0.1:54321``) to that file descriptor once listening, then
        closes it, so a parent process can wait for readiness. With
        ``announce_as``, prints ``serving <announce_as> on <address> (Ctrl+C to
        stop)`` to stderr once listening.

        Raises:
            OSError: the address cannot be bound (the port is taken, say).
        """
        self._reset_stop()
        self.serve_blocking(self._announcer(ready_fd, announce_as))

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening
        (what ``serve_model``, ``run`` and ``start`` run on their thread).

        Raises:
            OSError: the address cannot be bound.
        """
        aio.run_plain_asyncio(lambda: self._serve_plain(announce))

    # -- asyncio side ----------------------------------------------------------------------

    async def _serve_plain(self, announce: Callable[[], None]) -> None:
        if self.inline:
            await self._serve_plain_asyncio(announce, close_timeout=DRAIN_TIMEOUT)
            return
        async with aio.trio_guest() as guest:
            self._guest = guest
            try:
                await self._serve_plain_asyncio(announce, close_timeout=DRAIN_TIMEOUT)
            finally:
                self._guest = None

    def _services(self) -> list[Any]:
        return [ModelService(self)]

    def asyncio_invoke(self) -> Invoke:
        """How asyncio-side code runs a policy function: inline when it is a plain sync
        call, otherwise in the Trio guest run (async policies, worker threads)."""
        threaded = self.threaded

        async def invoke(fn: PolicyFn, arg: Any) -> Any:
            if not fn.is_async and not threaded:
                return fn.fn(arg)
            guest = self._guest
            if guest is None:
                raise RuntimeError("the model server's Trio run is not up")
            return await guest.call(self._invoke_in_trio, fn, arg)

        return invoke
