"""``EnvServer``: serve a gymnasium env over rlmesh-wire-v1 gRPC, as rlmesh 0.1.0 does.

The semantics (episodes, lanes, NEXT_STEP rolls, errors) live in the
transport-independent env host (:mod:`rlmesh_trio._envhost`); this module is
the grpclib plumbing around it (the parts shared with the model server are in
:mod:`._server_base`). grpclib runs on an asyncio loop: a plain asyncio loop
for the blocking :meth:`EnvServer.serve` and for ``serve_env`` (which runs
that same blocking serve on a dedicated thread), or the transport's
trio-asyncio loop inside the caller's Trio run for ``nursery.start(server.run)``;
the Join handler below is asyncio-side code. Join messages travel as bytes,
parsed and built by :mod:`._env_fastwire`.

What 0.1.0 clients rely on (protocol notes §3.1, §3.5, §8, §9):

* Join sends its response headers at once (a tonic client waits for them
  before its first request), and there is one Join at a time
  (FAILED_PRECONDITION for a second, freed when the stream ends).
* Every response echoes its request's id and carries ``endpoint_total_ns``.
* Env calls run on the serving loop's own thread when the env takes one
  request at a time anyway, or on worker threads (requests for different
  lanes concurrently, the rest in arrival order); see :meth:`EnvServer.serve`
  for the trade-off. Under ``server.run`` inside a Trio run they always run on
  worker threads, so the caller's Trio thread never blocks on the env.
* The stream ends (status OK) after Close and after a non-recoverable error;
  a half-close or a cancelled stream lets in-flight env calls finish, drops
  the session's leftover episodes, then frees the slot.
* Shutdown is refused unless ``allow_remote_shutdown`` (or the environment
  variable ``RLMESH_ALLOW_REMOTE_SHUTDOWN=1|true``); the health service
  answers SERVING for ``""``; messages up to 256 MiB; an optional bearer
  token (metadata ``authorization`` equal to it) and TLS context.
"""

from __future__ import annotations

import logging
import os
import signal
import ssl as ssl_module
import threading
import time
from collections.abc import Callable
from typing import Any

import grpclib.config
import grpclib.const
import grpclib.server
import trio
from grpclib.const import Status
from grpclib.exceptions import GRPCError, StreamTerminatedError

from .._envhost import SUPPORTED_EDITIONS, EnvHost, HostReply, make_host
from .._wire import core_pb, env_pb
from . import _bridge, _h2fast
from ._env_fastwire import decode_join_request, encode_join_response
from ._env_workers import EnvWorkers
from ._handshake import ENV_COMPONENT
from ._server_base import (
    ServerBase,
    defer_error_reset,
    handshake_reply,
    shutdown_reply,
    write_ready,
)

__all__ = ["BUSY_MESSAGE", "EnvServer"]

log = logging.getLogger("rlmesh_trio.transport.env_server")

BUSY_MESSAGE = (
    "environment already has an active Join session; only one client may be connected at a time"
)
SHUTDOWN_DISABLED = "remote shutdown is disabled for this environment endpoint"
#: Bounds on stopping: in-flight env calls to drain, then the env's own close().
DRAIN_TIMEOUT = 5.0
CLOSE_TIMEOUT = 5.0
# How long stopping waits for an open Join session to end by itself.
_CLOSE_GRACE = 0.5

_JOIN = "/rlmesh.env.v1.EnvService/Join"
_ENV_THREADS = ("auto", "loop", "worker", "caller")


def _remote_shutdown_from_env() -> bool:
    return os.environ.get("RLMESH_ALLOW_REMOTE_SHUTDOWN", "").strip().lower() in ("1", "true")


class EnvServer(ServerBase):
    """Serve a gymnasium ``Env``, a list of Envs (lanes) or a ``VectorEnv`` on ``address``.

    Three ways to run it: ``async with serve_env(env, address) as server`` inside
    Trio (the blocking serve on a thread of its own); blocking :meth:`serve`;
    or ``await nursery.start(server.run)`` with the transport's asyncio loop
    open (served by the caller's Trio thread through trio-asyncio: slower, for
    when no extra thread is wanted). ``close_env`` (default True, as in 0.1.0)
    closes the env when the server stops.

    ``env_thread`` says where env calls run (see :meth:`serve`); ``serve_env``
    and :meth:`serve` use it, ``run`` always uses worker threads.
    """

    def __init__(
        self,
        env: Any,
        address: str = "127.0.0.1:0",
        *,
        token: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        allow_remote_shutdown: bool | None = None,
        close_env: bool = True,
        env_thread: str = "auto",
    ) -> None:
        if env_thread not in _ENV_THREADS:
            raise ValueError(
                f'env_thread must be "auto", "loop", "worker" or "caller", got {env_thread!r}'
            )
        super().__init__(
            address,
            token=token,
            ssl=ssl,
            allow_remote_shutdown=_remote_shutdown_from_env()
            if allow_remote_shutdown is None
            else allow_remote_shutdown,
        )
        self.host: EnvHost = (
            env if isinstance(env, EnvHost) else make_host(env, close_env=close_env)
        )
        self.env_thread = env_thread
        self._stop: _bridge.AsyncioEvent | None = None
        # Set by request_shutdown (remote Shutdown, signals): stopping then waits longer
        # for an open session to end by itself than an owner's stop does.
        self._stop_requested = False
        self._session_active = False
        self._sessions_idle: _bridge.AsyncioEvent | None = None
        self._sessions: set[_JoinSession] = set()  # open Join streams (asyncio side)
        self._workers: EnvWorkers | None = None  # None while serving inline
        self._caller_pool: EnvWorkers | None = None

    kind = "env"

    # -- facts -----------------------------------------------------------------------------

    @property
    def contract(self) -> core_pb.EnvContract:
        return self.host.contract

    # -- Trio side -------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen, report ``task_status.started(self)``, serve until cancelled or shut down.

        Served by the caller's Trio thread through trio-asyncio, env calls on
        worker threads; needs the transport's asyncio loop (``async with
        asyncio_loop():``; the blocking serve in ``env_thread="caller"`` mode
        opens one). ``serve_env`` does not use this: it runs the blocking serve
        on a thread of its own, which is cheaper per request.

        Cancellation: stops listening, ends open streams, waits (bounded) for
        in-flight env calls, then closes the env if it owns it; all shielded and
        bounded, so it cannot hang the caller.
        """
        if not _bridge.in_loop():
            raise RuntimeError(
                "EnvServer.run needs the transport's asyncio loop: use serve_env(), "
                "EnvServer.serve(), or run it inside `async with asyncio_loop():`"
            )
        if self._caller_pool is not None:
            workers = self._caller_pool  # serve(env_thread="caller"): the serving thread runs jobs
        else:
            # One thread per lane (lanes run concurrently) plus one for whole-width requests.
            workers = EnvWorkers(self.host.num_envs + 1)
        workers.bind(trio.lowlevel.current_trio_token())
        self._workers = workers
        try:
            await _bridge.call(self._start_asyncio)
            task_status.started(self)
            assert self._stop is not None
            await _bridge.call(self._stop.wait)
            log.info("env server %s stopping: %s", self._address, self._shutdown_reason)
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(DRAIN_TIMEOUT + 1.0):
                    await self._close_grpc()
                # The env is closed by a worker too: an env bound to its thread stays there.
                with trio.move_on_after(CLOSE_TIMEOUT):
                    await workers.run(self.host.close)
                workers.stop()

    def request_shutdown(self, reason: str = "") -> None:
        """Ask :meth:`run` to stop (on the serving loop's thread; never blocks)."""
        self._shutdown_reason = reason
        self._stop_requested = True
        if self._stop is not None:
            self._stop.set()

    def _owner_stop(self) -> None:
        # stop_threadsafe's hook, on the loop: stop without a reason or the long grace.
        if self._stop is not None:
            self._stop.set()

    def close_bound(self) -> float:
        """Stopping drains in-flight env calls, then closes the env, each bounded."""
        return DRAIN_TIMEOUT + CLOSE_TIMEOUT

    def serve(self, ready_fd: int | None = None, *, env_thread: str | None = None) -> None:
        """Serve until SIGINT/SIGTERM or an accepted remote Shutdown (blocking).

        With ``ready_fd``, writes one line with the bound address
        (``tcp://127.0.0.1:54321``) to that file descriptor once listening, then
        closes it, as ``python -m rlmesh._cli.serve_env --ready-fd N`` does.

        Where env calls run (``env_thread``):

        * ``"loop"``: inline on the serving thread (the caller's), which runs a
          plain asyncio loop: no thread hand-off and no Trio, the cheapest per
          step. The trade-off: while an env call runs, nothing else is served
          (health probes, a Shutdown, a refused second Join wait for it), and
          lanes take turns.
        * ``"worker"``: on worker threads, lanes concurrently, from a plain
          asyncio loop on the calling thread; the loop stays responsive during
          env calls.
        * ``"caller"``: on the thread that called ``serve()``, with the server on
          a background Trio thread (0.1.0's blocking-serve behaviour, for
          simulators bound to the thread that created them); lanes take turns.
        * ``"auto"`` (default): ``"loop"`` when the env runs one request at a
          time anyway (one env, or a vector env), ``"worker"`` for several lanes.
          ``"loop"`` keeps env calls on the calling thread too.

        ``env_thread=None`` takes the one given to the constructor.
        """
        mode = self.env_thread if env_thread is None else env_thread
        if mode not in _ENV_THREADS:
            raise ValueError(
                f'env_thread must be "auto", "loop", "worker" or "caller", got {mode!r}'
            )
        self._reset_stop()
        self._serve_mode(mode, lambda: write_ready(ready_fd, self.url))

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening
        (what ``serve_env`` runs on its thread). ``env_thread="caller"`` is
        refused here: that mode needs a second thread of its own."""
        if self.env_thread == "caller":
            raise ValueError('env_thread="caller" is for the blocking serve() only')
        self._serve_mode(self.env_thread, announce)

    def _serve_mode(self, env_thread: str, announce: Callable[[], None]) -> None:
        if env_thread == "auto":
            env_thread = "worker" if self.host.concurrent else "loop"
        if env_thread in ("loop", "worker"):
            inline = env_thread == "loop"
            _bridge.run_plain_asyncio(lambda: self._serve_plain(announce, inline=inline))
            return
        pool = EnvWorkers(0)
        self._caller_pool = pool
        done = threading.Event()
        failure: list[BaseException] = []

        def run_server() -> None:
            try:
                self._serve_trio(announce)
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()
                pool.wake()

        restore = self._stop_on_caller_signals()
        server_thread = threading.Thread(target=run_server, name="rlmesh-trio-env-server")
        server_thread.start()
        try:
            pool.work_here(done)
        finally:
            restore()
            server_thread.join()
            self._caller_pool = None
        if failure:
            raise failure[0]

    async def _serve_plain(self, announce: Callable[[], None], *, inline: bool) -> None:
        """The blocking serve on a plain asyncio loop (no Trio); env calls inline or
        on worker threads that wake the loop with ``call_soon_threadsafe``."""
        workers = None
        if not inline:
            workers = EnvWorkers(self.host.num_envs + 1)
            workers.bind_loop(_bridge.running_loop())
        self._workers = workers

        async def close() -> None:
            grpc = self._grpc
            self._grpc = None
            if grpc is not None:
                await self._aio_close(grpc)
            self._unlink_socket()
            if workers is None:
                self.host.close()
                return
            try:
                await _bridge.asyncio_wait_for(workers.submit(self.host.close), CLOSE_TIMEOUT)
            finally:
                workers.stop()

        async def stopped() -> None:
            assert self._stop is not None
            await self._stop.wait()

        try:
            await self._serve_plain_asyncio(
                announce,
                start=self._start_asyncio,
                stopped=stopped,
                close=close,
                request_stop=self.request_shutdown,
                owner_stop=self._owner_stop,
                close_timeout=DRAIN_TIMEOUT + CLOSE_TIMEOUT,
            )
        finally:
            if workers is not None:
                workers.stop()  # idempotent; covers a failed start (e.g. the port is taken)

    def _stop_on_caller_signals(self) -> Callable[[], None]:
        """In ``env_thread="caller"`` mode the main thread handles SIGINT/SIGTERM: the
        first one stops the server gracefully (an env call in progress is not
        interrupted); the previous handlers come back for anything after that."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

        def on_signal(signum: int, _frame: Any) -> None:
            self._note_signal(signum)
            restore()
            self.stop_threadsafe()  # a signal before the loop's start stops it once up

        for signum in previous:
            signal.signal(signum, on_signal)
        return restore

    async def _close_grpc(self) -> None:
        grpc = self._grpc
        if grpc is None:
            return
        self._grpc = None
        await _bridge.call(self._aio_close, grpc)
        self._unlink_socket()

    # -- asyncio side ----------------------------------------------------------------------

    async def _start_asyncio(self) -> None:
        self._stop = _bridge.AsyncioEvent()
        self._sessions_idle = _bridge.AsyncioEvent()
        self._sessions_idle.set()
        await self._listen(
            _EnvService(self),
            config=grpclib.config.Configuration(
                # Larger windows than HTTP/2's 64 KiB keep image observations flowing.
                http2_connection_window_size=16 * 1024 * 1024,
                http2_stream_window_size=16 * 1024 * 1024,
            ),
        )

    async def _aio_close(self, grpc: grpclib.server.Server) -> None:
        # Give an open session a chance to end on its own first: after a remote
        # Shutdown, until it is idle (bounded by the Trio-side drain timeout);
        # otherwise briefly, so a client that has just half-closed sees its stream
        # end normally rather than reset. Then cancel what is left, and close.
        loop = _bridge.running_loop()
        deadline = loop.time() + DRAIN_TIMEOUT
        idle = self._sessions_idle
        if idle is not None:
            remote = self._stop_requested
            try:
                # Inside the Trio-side bound, so the listener is always closed below.
                grace = 0.8 * DRAIN_TIMEOUT if remote else min(_CLOSE_GRACE, DRAIN_TIMEOUT / 2)
                await _bridge.asyncio_wait_for(idle.wait(), grace)
            except TimeoutError:
                pass
        grpc.close()
        try:
            # Cancelled handlers wait for their in-flight env calls; bounded, so that
            # a call that never returns cannot keep the handlers (and the loop) alive.
            await _bridge.asyncio_wait_for(grpc.wait_closed(), max(0.05, deadline - loop.time()))
        except TimeoutError:
            for session in list(self._sessions):
                session.abandon()
            await grpc.wait_closed()
        if self._connections is not None:
            self._connections.goaway()
            await _bridge.asyncio_sleep(0)  # let the GOAWAY frames reach the sockets
            self._connections.close()

    def _is_stopping(self) -> bool:
        return self._grpc is None or (self._stop is not None and self._stop.is_set())

    def _claim_session(self) -> bool:
        if self._session_active:
            return False
        self._session_active = True
        if self._sessions_idle is not None:
            self._sessions_idle.clear()
        return True

    def _release_session(self) -> None:
        self._session_active = False
        if self._sessions_idle is not None:
            self._sessions_idle.set()


class _EnvService(env_pb.EnvServiceBase):
    """The generated EnvService, with Join taken over at the stream level."""

    def __init__(self, server: EnvServer) -> None:
        self._server = server

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        mapping = super().__mapping__()
        mapping[_JOIN] = grpclib.const.Handler(
            self._join,
            grpclib.const.Cardinality.STREAM_STREAM,
            # Raw bytes: the session parses and serialises Join messages itself
            # (_env_fastwire: Step/Reset by hand, betterproto2 for the rest).
            bytes,
            bytes,
        )
        return mapping

    async def handshake(self, message: env_pb.HandshakeRequest) -> env_pb.HandshakeResponse:
        host = self._server.host
        reply = handshake_reply(
            message.base,
            component=ENV_COMPONENT,
            capabilities=host.capabilities,
            editions=SUPPORTED_EDITIONS,
        )
        return env_pb.HandshakeResponse(
            base=reply, env_contract=host.contract if reply.compatible else None
        )

    async def shutdown(self, message: env_pb.ShutdownRequest) -> env_pb.ShutdownResponse:
        server = self._server
        return env_pb.ShutdownResponse(
            base=shutdown_reply(
                message.base,
                allowed=server.allow_remote_shutdown,
                refusal=SHUTDOWN_DISABLED,
                stop=server.request_shutdown,
            )
        )

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        server = self._server
        defer_error_reset(stream)
        if not server._claim_session():
            raise GRPCError(Status.FAILED_PRECONDITION, BUSY_MESSAGE)
        session = _JoinSession(server.host, stream, server._workers, server._is_stopping)
        server._sessions.add(session)
        try:
            # Headers first: a 0.1.0 client sends nothing until it has them (pitfall 1).
            await stream.send_initial_metadata()
            await session.run()
        finally:
            server._sessions.discard(session)
            server._release_session()


def _decode(data: bytes) -> env_pb.JoinRequest:
    try:
        return decode_join_request(data)
    except Exception as exc:
        # No request id can be read, so no typed reply is possible: the stream ends
        # with a status saying why once the requests in flight are answered.
        raise GRPCError(Status.INVALID_ARGUMENT, f"could not decode a JoinRequest: {exc}") from exc


class _JoinSession:
    """One Join stream: read requests, run them through the host, answer by request id."""

    def __init__(
        self,
        host: EnvHost,
        stream: grpclib.server.Stream[Any, Any],
        workers: EnvWorkers | None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._stopping = stopping
        self._host = host
        self._stream = stream
        self._workers = workers
        self._loop = _bridge.running_loop()
        self._inflight: set[_bridge.AsyncioTask[None]] = set()
        self._send_lock = _bridge.AsyncioLock()
        self._finished = _bridge.AsyncioEvent()
        self._ended = False  # a Close reply or a non-recoverable error went out
        self._closed_by_request = False
        # A request the server could not read (oversized, undecodable): the stream
        # ends with this status once the requests already in flight are answered.
        self._read_error: GRPCError | None = None

    async def run(self) -> None:
        reader = self._loop.create_task(self._read())
        try:
            await self._finished.wait()
        finally:
            reader.cancel()
            await self._drain(reader)
            if not self._closed_by_request:
                self._host.end_session()
        if self._read_error is not None and not self._ended:
            raise self._read_error

    async def _drain(self, reader: _bridge.AsyncioTask[None]) -> None:
        """Wait for in-flight env calls (they cannot be interrupted) before the slot frees.

        A client that drops the connection gets this handler cancelled, possibly
        more than once; we keep waiting regardless, so a reconnect is refused
        until the env is really idle (as 0.1.0 does). Stopping the server is
        bounded on the Trio side, so this cannot hang a shutdown.
        """
        pending = {*self._inflight, reader}
        drained = _bridge.spawn_asyncio(_bridge.asyncio_wait(pending))
        while not drained.done():
            try:
                await _bridge.asyncio_shield(drained)
            except _bridge.AsyncioCancelledError:
                if self._stopping():
                    raise

    def abandon(self) -> None:
        """Stop waiting for in-flight env calls (stopping, past the drain bound): their
        tasks are cancelled; the calls themselves finish on their threads, unanswered."""
        for task in list(self._inflight):
            task.cancel()

    async def _read(self) -> None:
        try:
            while not self._ended:
                data = await self._stream.recv_message()
                if data is None:
                    break  # half-close: answer what is in flight, then end
                received = time.perf_counter_ns()
                request = _decode(data)
                if self._workers is None:
                    # Inline (serve(env_thread="loop")): one request at a time, in order.
                    await self._answer(request, self._host.handle(request), received)
                else:
                    self._spawn(request, received)
        except GRPCError as exc:
            log.info("env Join stream refused a request: %s: %s", exc.status.name, exc.message)
            self._read_error = exc
        except (ConnectionError, OSError, StreamTerminatedError) as exc:
            log.debug("env Join stream read ended: %r", exc)
        finally:
            if self._inflight:
                await _bridge.asyncio_wait(set(self._inflight))
            self._finished.set()

    def _spawn(self, request: env_pb.JoinRequest, received: int) -> None:
        # Admission fixes the request's place in line, so it happens here, in arrival order.
        ticket = self._host.admit(request)
        task = self._loop.create_task(self._process(request, ticket, received))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _process(self, request: env_pb.JoinRequest, ticket: Any, received: int) -> None:
        host = self._host
        assert self._workers is not None
        try:
            reply = await self._workers.submit(host.run, ticket)
        except BaseException:
            host.discard(ticket)
            raise
        await self._answer(request, reply, received)

    async def _answer(
        self, request: env_pb.JoinRequest, reply: HostReply | None, received: int
    ) -> None:
        if reply is None or self._ended:
            return
        response = reply.response
        response.request_id = request.request_id
        response.user_ns = reply.user_ns
        response.decode_ns = reply.decode_ns
        response.encode_ns = reply.encode_ns
        response.queue_ns = reply.queue_ns
        if reply.end_stream:
            self._ended = True
            self._closed_by_request = response.close is not None
        response.endpoint_total_ns = time.perf_counter_ns() - received
        try:
            async with self._send_lock:
                await _h2fast.send_server_message(self._stream, encode_join_response(response))
        except Exception as exc:  # the stream is gone (h2 StreamClosedError, reset, ...)
            log.debug("env Join stream send failed: %r", exc)
            self._ended = True
            self._finished.set()
            return
        if reply.end_stream:
            self._finished.set()
