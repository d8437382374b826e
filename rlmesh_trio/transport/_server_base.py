"""What the env and model servers share: bind address, token, handshake, the blocking serve.

Both servers are grpclib servers on a plain asyncio loop (protocol notes
§8): a bind address in the forms 0.1.0 accepts (parsed by
:func:`~._address.parse_address`), a listening socket of ours (see
:mod:`._server_net`), the gRPC health service, wire-v1's 256 MiB message cap,
an optional bearer token compared in constant time, the generation-only
handshake, a Shutdown refused unless allowed, and a blocking serve that stops
on SIGINT/SIGTERM (main thread only) and announces readiness. Each server
keeps its own Join semantics; only this plumbing lives here.

Every other way to run a server wraps the blocking serve on a thread:
``serve_env``/``serve_model`` and ``server.run`` for Trio programs
(:mod:`._server_trio`), ``start``/``wait``/``shutdown`` and ``with`` for code
that is not Trio (:class:`~._server_sync.SyncLifecycle`), both through
:class:`~._server_sync.ServingThread`. They stop it with
:meth:`ServerBase.stop_threadsafe`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl as ssl_module
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

import grpclib.config
import grpclib.const
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from .._signals import SERVER_SIGNALS, describe_signal
from .._wire import PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb
from . import _server_loop as aio
from ._address import parse_address
from ._handshake import local_peer_info
from ._server_net import Listener, open_listener
from ._server_sync import SyncLifecycle
from ._server_trio import run_until_stopped

__all__ = [
    "SHUTDOWN_GRACE",
    "ServerBase",
    "announce_line",
    "decode_or_refuse",
    "handshake_reply",
    "raw_join",
    "write_ready",
]

log = logging.getLogger("rlmesh_trio.transport.server")

M = TypeVar("M")

#: Let a Shutdown reply leave before the server starts closing connections.
SHUTDOWN_GRACE = 0.05


def handshake_reply(
    base: core_pb.HandshakeRequest | None,
    *,
    component: str,
    capabilities: Mapping[str, str],
    editions: Iterable[str],
) -> core_pb.HandshakeResponse:
    """The base HandshakeResponse: only the generation decides compatibility (§2.1);
    editions are the runtime's business. 0.1.0's error text for a mismatch.

    Raises:
        GRPCError: INVALID_ARGUMENT when the request has no base.
    """
    if base is None:
        raise GRPCError(Status.INVALID_ARGUMENT, "handshake request missing base")
    compatible = base.protocol_generation.strip() == PROTOCOL_GENERATION
    return core_pb.HandshakeResponse(
        compatible=compatible,
        peer_info=local_peer_info(component),
        capabilities=dict(capabilities),
        supported_workflow_editions=list(editions),
        preferred_workflow_edition=WORKFLOW_EDITION,
        error_message=None
        if compatible
        else (
            f"protocol generation {base.protocol_generation} not compatible with server "
            f"{PROTOCOL_GENERATION}"
        ),
    )


def raw_join(
    mapping: dict[str, grpclib.const.Handler], path: str, handler: Callable[..., Any]
) -> dict[str, grpclib.const.Handler]:
    """A generated service's mapping with Join at ``path`` taken over at the stream level:
    raw bytes each way, so the session parses and serialises Join messages itself
    (the hand codecs of :mod:`rlmesh_trio.wire`, betterproto2 for the rest)."""
    mapping[path] = grpclib.const.Handler(
        handler, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes
    )
    return mapping


def decode_or_refuse(decode: Callable[[bytes], M], data: bytes) -> M:
    """``decode(data)``, or INVALID_ARGUMENT saying why.

    No request id can be read from bytes that do not parse, so no typed reply
    is possible: the stream ends with this status (once the requests in flight
    are answered) rather than grpclib's UNKNOWN for an application error.

    Raises:
        GRPCError: INVALID_ARGUMENT when ``data`` is not a message ``decode`` reads.
    """
    try:
        return decode(data)
    except Exception as exc:
        raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a JoinRequest: {exc}") from exc


def write_ready(ready_fd: int | None, url: str) -> None:
    """Announce readiness the 0.1.0 way: one line with the bound URL on ``ready_fd``, closed."""
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as ready:
            ready.write(url + "\n")


def announce_line(label: str, address: str) -> str:
    """The line a served CLI prints once bound: ``serving CartPole-v1 on 127.0.0.1:PORT``."""
    return f"serving {label} on {address} (Ctrl+C to stop)"


class ServerBase(SyncLifecycle):
    """The plumbing both servers share; subclasses implement :meth:`serve_blocking`.

    ``kind`` names the endpoint in logs and in the token refusal
    (``"invalid env token"``, as 0.1.0 words it).
    """

    kind: ClassVar[str] = "endpoint"

    def __init__(
        self,
        address: str,
        *,
        token: str | None,
        ssl: ssl_module.SSLContext | None,
        allow_remote_shutdown: bool,
    ) -> None:
        super().__init__()
        self._bind = parse_address(address)
        self._token = token
        self._ssl = ssl
        self.allow_remote_shutdown = allow_remote_shutdown
        self._address: str | None = None
        self._shutdown_reason: str | None = None
        self._stop: aio.AsyncioEvent | None = None  # set to stop serving (asyncio side)
        self._listener: Listener | None = None
        # The thread-safe stop hand-off (see stop_threadsafe): the serving loop, while
        # it runs, and whether a stop was asked before it ran.
        self._stop_lock = threading.Lock()
        self._serving_loop: aio.AsyncioLoop | None = None
        self._stop_asked = False

    # -- facts -----------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The bound address (``127.0.0.1:54321`` or ``unix:///path``); set once running.

        Raises:
            RuntimeError: before the server is listening.
        """
        if self._address is None:
            raise RuntimeError(f"the {self.kind} server is not running yet")
        return self._address

    @property
    def url(self) -> str:
        """The bound address with its scheme (``tcp://127.0.0.1:54321``), as a ready-fd line."""
        address = self.address
        return address if address.startswith("unix://") else f"tcp://{address}"

    @property
    def shutdown_reason(self) -> str | None:
        """Why serving stopped: an accepted remote Shutdown's reason, or ``signal SIGTERM``."""
        return self._shutdown_reason

    def close_bound(self) -> float:
        """Seconds stopping may take (drain in-flight requests, close); subclasses set it."""
        return 5.0

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped; ``announce()`` once listening.

        What every other way of running a server runs on its thread, and what
        each server's public ``serve()`` wraps. Stops on an accepted remote
        Shutdown, on :meth:`stop_threadsafe`, and (main thread only) on
        SIGINT/SIGTERM.
        """
        raise NotImplementedError

    def shutdown_reply(
        self, base: core_pb.ShutdownRequest | None, *, refusal: str, blank_reason: str = ""
    ) -> core_pb.ShutdownResponse:
        """Answer a remote Shutdown (asyncio side): refused with ``refusal`` unless
        ``allow_remote_shutdown``; otherwise :meth:`request_shutdown` runs shortly after,
        once the reply is on its way, with the request's reason (or ``blank_reason``).

        Raises:
            GRPCError: INVALID_ARGUMENT when the request has no base.
        """
        if base is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "shutdown request missing base")
        if not self.allow_remote_shutdown:
            return core_pb.ShutdownResponse(accepted=False, message=refusal)
        reason = base.reason
        aio.running_loop().call_later(SHUTDOWN_GRACE, self.request_shutdown, reason or blank_reason)
        text = f"shutdown accepted: {reason}" if reason else "shutdown accepted"
        return core_pb.ShutdownResponse(accepted=True, message=text)

    def refuse_thread(self, what: str) -> None:
        """Raise when this server cannot be served from a thread of its own (``what``
        names the call); every server can, but an env server with
        ``env_thread="caller"``.

        Raises:
            ValueError: the server needs the caller's thread.
        """

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, report ``task_status.started(self)``, and serve until cancelled or a
        remote Shutdown is accepted, for ``await nursery.start(server.run)`` in a Trio
        program: the server runs on a thread of its own (as under ``serve_env`` and
        ``serve_model``).

        Cancellation: stops listening, ends open streams, waits (bounded) for
        in-flight calls, then closes what the server owns; all shielded and
        bounded, so it cannot hang the caller.

        Raises:
            ValueError: see :meth:`refuse_thread`.
            OSError: the address cannot be bound.
        """
        self.refuse_thread(f"{type(self).__name__}.run")
        await run_until_stopped(self, task_status)

    def _announcer(self, ready_fd: int | None, label: str | None) -> Callable[[], None]:
        """What the blocking serve announces: the ready-fd line, and with ``label`` one
        line on stderr naming what is served and where."""

        def announce() -> None:
            write_ready(ready_fd, self.url)
            if label is not None:
                print(announce_line(label, self.address), file=sys.stderr, flush=True)

        return announce

    # -- stopping from another thread ------------------------------------------------------

    def stop_threadsafe(self) -> None:
        """Ask a running serve to stop, from any thread (never blocks).

        An owner's stop: unlike a remote Shutdown it leaves
        :attr:`shutdown_reason` alone. Asked before the serving loop is up, the
        loop stops as soon as it has started.
        """
        with self._stop_lock:
            self._stop_asked = True
            loop = self._serving_loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: serving is over
                loop.call_soon_threadsafe(self._owner_stop)

    def _reset_stop(self) -> None:
        with self._stop_lock:
            self._stop_asked = False
            self._serving_loop = None

    def _note_signal(self, signum: int) -> None:
        self._shutdown_reason = describe_signal(signum)
        log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)

    # -- the blocking serve on a plain asyncio loop ----------------------------------------

    def _services(self) -> list[Any]:
        """The gRPC services this server offers (health is added); subclasses say."""
        raise NotImplementedError

    async def _close(self) -> None:
        """Stop serving (asyncio side): the listener and whatever else the server owns."""
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close(self.close_bound() / 2)

    def request_shutdown(self, reason: str = "") -> None:
        """Ask the serve to stop, recording ``reason`` (on the serving loop's thread;
        never blocks): an accepted remote Shutdown, or a signal."""
        self._shutdown_reason = reason
        self._owner_stop()

    def _owner_stop(self) -> None:
        # stop_threadsafe's hook, on the loop: stop without recording a reason.
        if self._stop is not None:
            self._stop.set()

    async def _serve_plain_asyncio(
        self,
        announce: Callable[[], None],
        *,
        config: grpclib.config.Configuration | None = None,
        close_timeout: float,
    ) -> None:
        """Listen, announce, serve until stopped (a remote Shutdown, SIGINT/SIGTERM on
        the main thread, or :meth:`stop_threadsafe`), then :meth:`_close` bounded by
        ``close_timeout``. Runs inside :func:`._server_loop.run_plain_asyncio`.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = aio.running_loop()
        self._stop = stop = aio.AsyncioEvent()
        self._listener = await open_listener(
            self._bind,
            self._services(),
            kind=self.kind,
            token=self._token,
            ssl=self._ssl,
            config=config,
        )
        self._address = self._listener.address
        handled = threading.current_thread() is threading.main_thread()

        def on_signal(signum: int) -> None:
            self._note_signal(signum)
            self.request_shutdown(self._shutdown_reason or "signal")

        with self._stop_lock:
            self._serving_loop = loop
            if self._stop_asked:
                stop.set()
        try:
            if handled:
                for signum in SERVER_SIGNALS:
                    loop.add_signal_handler(signum, on_signal, signum)
            announce()
            await stop.wait()
            log.info("%s server %s stopping: %s", self.kind, self._address, self._shutdown_reason)
        finally:
            with self._stop_lock:
                self._serving_loop = None
            if handled:
                for signum in SERVER_SIGNALS:
                    loop.remove_signal_handler(signum)
            try:
                await aio.asyncio_wait_for(self._close(), close_timeout)
            except TimeoutError:
                log.warning(
                    "%s server %s: close took over %ss", self.kind, self._address, close_timeout
                )
