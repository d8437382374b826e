"""What the env and model clients share: one connection, one Join session, their lifecycle."""

from __future__ import annotations

import contextlib
import ssl as _ssl
from types import TracebackType
from typing import Any, Self

import trio

from .._endpoints import EndpointInfo
from ._client import ClientConnection
from ._join import JoinSession

__all__ = ["CLOSE_GRACE", "RemoteEndpoint"]

#: Seconds ``aclose`` (and an env ``close``) wait for the server to end a half-closed stream.
CLOSE_GRACE = 1.0


class RemoteEndpoint:
    """A remote endpoint (``host:port``, ``tcp://``, ``http://`` or ``unix:///path``).

    ``token`` is sent verbatim as ``authorization`` metadata; ``ssl`` turns on TLS.
    The address is parsed at once: a malformed one raises :class:`InvalidSpec`.
    Used as ``async with``, the connection's reader runs in a nursery owned
    by the block; otherwise in a Trio system task that ends with :meth:`aclose`.
    """

    _session: JoinSession[Any] | None

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = 10.0,
        token: str | None = None,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        self._conn = ClientConnection(
            address, connect_timeout=connect_timeout, token=token, ssl=ssl
        )
        self._info: EndpointInfo | None = None
        self._session = None
        self._last_id = 0
        self._closed = False
        self._exit_stack: contextlib.AsyncExitStack | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._conn.label!r})"

    @property
    def address(self) -> str:
        return self._conn.label

    @property
    def info(self) -> EndpointInfo | None:
        """What the handshake said (``None`` before :meth:`connect`)."""
        return self._info

    async def aclose(self) -> None:
        """Half-close the Join stream, then drop the connection. Idempotent.

        A shared model client is closed by its owner once every route is done.
        Safe in a cancelled scope when shielded (callers shield it); unshielded
        it still tears everything down without waiting.
        """
        if self._closed:
            return
        self._closed = True
        session = self._session
        try:
            if session is not None and session.alive:
                session.half_close()
                with trio.move_on_after(CLOSE_GRACE):
                    await session.wait_finished()
        finally:
            if session is not None:
                session.kill()
            self._conn.close()

    async def __aenter__(self) -> Self:
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        self._conn.nursery = nursery
        self._exit_stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            with trio.CancelScope(shield=True):
                await self.aclose()
        finally:
            self._conn.nursery = None
            stack, self._exit_stack = self._exit_stack, None
            if stack is not None:
                await stack.aclose()
