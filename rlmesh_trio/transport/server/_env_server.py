"""``EnvServer``: serve a gymnasium env over rlmesh-wire-v1 gRPC, as rlmesh 0.1.0 does.

The semantics (episodes, lanes, NEXT_STEP rolls, errors) live in the env host
(:mod:`rlmesh_trio._envhost`). Shutdown is refused unless ``allow_remote_shutdown``
(or ``RLMESH_ALLOW_REMOTE_SHUTDOWN=1|true``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl as ssl_module
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import betterproto2
import trio

from ... import _wire as wire
from ..._envhost import SUPPORTED_EDITIONS, Call, EnvHost, HostReply, make_host
from ..._protocol import core_pb, env_pb
from ..._signals import SERVER_SIGNALS, on_first_signal
from ..._wire._env_codec import decode_join_arm, decode_step_arm, encode_step_reply
from ..._wire._step_parts import StepParts, encode_step_parts
from .._handshake import ENV_COMPONENT
from ._base import ServerBase
from ._call import CallLost, ServerCall
from ._net import CODEC, THREAD_DECODE_BYTES, decode_request
from ._thread import EnvWorkers, ServingThread, serving_in_thread

__all__ = ["BUSY_MESSAGE", "EnvServer", "serve_env"]

log = logging.getLogger("rlmesh_trio.transport.env_server")

BUSY_MESSAGE = (
    "environment already has an active Join session; only one client may be connected at a time"
)
STOPPING_MESSAGE = "the env server is shutting down"

#: Bounds on stopping: in-flight env calls to drain, then the env's own close().
DRAIN_TIMEOUT = 5.0
CLOSE_TIMEOUT = 5.0
# How long stopping waits for an open Join session to end by itself.
_CLOSE_GRACE = 0.5


def _check_env_thread(mode: str) -> None:
    if mode not in ("auto", "loop", "worker", "caller"):
        raise ValueError(f'env_thread must be "auto", "loop", "worker" or "caller", got {mode!r}')


class EnvServer(ServerBase):
    """Serve a gymnasium ``Env``, a list of Envs (lanes) or a ``VectorEnv`` on ``address``.

    Ways to run it: blocking :meth:`serve`; ``start()`` / ``wait()`` /
    ``shutdown()`` or ``with EnvServer(env) as server:`` from code that is not
    Trio; ``async with serve_env(env, address)`` or ``await
    nursery.start(server.run)`` inside Trio. ``close_env`` (default True, as
    in 0.1.0) closes the env when the server stops; ``env_thread`` says where
    env calls run (see :meth:`serve`).

    Raises:
        TypeError: ``env`` is no env (see above), or ``limits`` no ``ServerLimits``.
        ValueError: an unknown ``env_thread``, an empty list, a SAME_STEP vector env.
        InvalidSpec: a bad ``address`` (see :func:`~._address.parse_address`).
    """

    _kind = "env"
    _grpc_service = "rlmesh.env.v1.EnvService"
    _messages: ClassVar[Any] = env_pb
    _component = ENV_COMPONENT
    _shutdown_refusal = "remote shutdown is disabled for this environment endpoint"

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
        limits: wire.ServerLimits | None = None,
    ) -> None:
        _check_env_thread(env_thread)
        if allow_remote_shutdown is None:
            flag = os.environ.get("RLMESH_ALLOW_REMOTE_SHUTDOWN", "").strip().lower()
            allow_remote_shutdown = flag in ("1", "true")
        remote = allow_remote_shutdown
        super().__init__(address, token=token, ssl=ssl, allow_remote_shutdown=remote, limits=limits)
        self._host: EnvHost = (
            env if isinstance(env, EnvHost) else make_host(env, close_env=close_env)
        )
        self._env_thread = env_thread
        self._session: JoinSession | None = None  # the one open Join stream
        self._workers: EnvWorkers | None = None  # None while serving inline

    @property
    def contract(self) -> core_pb.EnvContract:
        """The env's contract (spaces, metadata) as the Handshake announces it."""
        return self._host.contract

    # -- ways to run -----------------------------------------------------------------------

    def _close_bound(self) -> float:
        """Stopping drains in-flight env calls, then closes the env, each bounded."""
        return DRAIN_TIMEOUT + CLOSE_TIMEOUT

    def _close_unstarted(self) -> None:
        """Never started: the env is closed all the same (0.1.0's lifecycle)."""
        self._host.close()

    def _refuse_thread(self) -> None:
        if self._env_thread == "caller":
            raise ValueError('env_thread="caller" needs the blocking EnvServer.serve()')

    def serve(
        self,
        ready_fd: int | None = None,
        *,
        env_thread: str | None = None,
        announce_as: str | None = None,
    ) -> None:
        """Serve until SIGINT/SIGTERM or an accepted remote Shutdown (blocking); ``ready_fd``
        and ``announce_as`` as in :meth:`ServerBase.serve`.

        Where env calls run (``env_thread``; ``None``: the constructor's):

        * ``"loop"``: inline on the serving thread (the caller's), which runs the
          server's ``trio.run``: no thread hand-off, the cheapest per step; but while
          an env call runs nothing else is served (health probes, a Shutdown, a
          refused second Join wait for it), and lanes take turns.
        * ``"worker"``: on worker threads, lanes concurrently; the loop on the
          calling thread stays responsive during env calls.
        * ``"caller"``: on the thread that called ``serve()``, with the server on
          a background thread (0.1.0's blocking serve, for simulators bound to
          the thread that created them); lanes take turns.
        * ``"auto"`` (default): ``"loop"`` when the env runs one request at a
          time anyway (one env, or a vector env), ``"worker"`` for several lanes.

        Raises:
            ValueError: an unknown ``env_thread``.
            OSError: the address cannot be bound (the port is taken, say).
        """
        mode = self._env_thread if env_thread is None else env_thread
        _check_env_thread(mode)
        self._reset_stop()
        self._serve_mode(mode, self._announcer(ready_fd, announce_as))

    def _serve_blocking(self, announce: Callable[[], None]) -> None:
        """:meth:`ServerBase._serve_blocking`, env calls where ``env_thread`` says."""
        self._serve_mode(self._env_thread, announce)

    def _serve_mode(self, env_thread: str, announce: Callable[[], None]) -> None:
        if env_thread == "auto":
            env_thread = "worker" if self._host.concurrent else "loop"
        if env_thread == "caller":
            self._serve_on_caller(announce)
            return
        workers = None if env_thread == "loop" else EnvWorkers(self._host.num_envs + 1)
        self._workers = workers
        try:
            super()._serve_blocking(announce)
        finally:
            if workers is not None:
                workers.stop()  # idempotent; covers a failed start (e.g. the port is taken)

    def _serve_on_caller(self, announce: Callable[[], None]) -> None:
        """``env_thread="caller"``: the server on a background thread, env calls here.

        The first SIGINT/SIGTERM (main thread) stops the server gracefully (an env
        call in progress is not interrupted); the previous handlers come back for
        anything after that."""
        self._workers = pool = EnvWorkers(0)

        def on_signal(signum: int) -> None:
            self._note_signal(signum)  # a reason: stopping waits for an open session
            self._stop_threadsafe()  # a signal before the loop's start stops it once up

        serving = ServingThread(
            self, on_listening=announce, on_ended=pool.stop, serve=super()._serve_blocking
        )
        with on_first_signal(SERVER_SIGNALS, on_signal):
            serving.thread.start()
            try:
                pool.work_here()
            finally:
                serving.thread.join()
        if serving.failure is not None:
            raise serving.failure

    # -- the serving run ---------------------------------------------------------------------

    async def _handshake(self, message: env_pb.HandshakeRequest) -> env_pb.HandshakeResponse:
        host = self._host
        reply = self._handshake_reply(
            message.base, capabilities=host.capabilities, editions=SUPPORTED_EDITIONS
        )
        contract = host.contract if reply.compatible else None
        return env_pb.HandshakeResponse(base=reply, env_contract=contract)

    async def _join(self, call: ServerCall) -> None:
        if self._session is not None:
            raise wire.GrpcError(wire.GrpcStatus.FAILED_PRECONDITION, BUSY_MESSAGE)
        session = self._session = JoinSession(self, call)
        try:
            # Headers first: a 0.1.0 client sends nothing until it has them (pitfall 1).
            call.send_headers()
            await session.run()
        finally:
            self._session = None
            session.released.set()

    async def _close(self) -> None:
        """Stop serving: let an open session end by itself for a moment (after a remote
        Shutdown or a signal, until it is idle; otherwise briefly, so a client that has
        just half-closed sees its stream end normally), then end what is left with
        UNAVAILABLE, close the connections and close the env."""
        deadline = trio.current_time() + DRAIN_TIMEOUT
        asked = self._shutdown_reason is not None
        session = self._session
        if session is not None:
            with trio.move_on_after(0.8 * DRAIN_TIMEOUT if asked else _CLOSE_GRACE):
                await session.released.wait()
            if not session.released.is_set():
                session.end_for_shutdown()
                # An ended session still waits for its in-flight env calls (bounded).
                with trio.move_on_at(max(trio.current_time() + 0.05, deadline)):
                    await session.released.wait()
                if not session.released.is_set():
                    session.abandon()
        await super()._close()
        if self._workers is None:
            self._host.close()
        else:
            with trio.move_on_after(CLOSE_TIMEOUT):
                await self._workers.run(self._host.close)


@contextlib.asynccontextmanager
async def serve_env(
    env: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[EnvServer]:
    """Serve ``env`` over gRPC from a Trio program; yields the server once it is listening.

    ``env`` and ``options`` are :class:`EnvServer`'s. The server runs on a thread of
    its own with a ``trio.run`` of its own, so serving never waits for the caller.
    Thread safety: from then on the env belongs to the server (called and
    closed on its threads, as ``env_thread`` says); do not use it elsewhere.

    Cancellation: leaving the block (normally, by error or by cancellation) stops
    the server: in-flight env calls are drained and the env closed, each bounded,
    while the caller waits shielded for at most the server's close bound plus a
    second (a thread stuck in an env call is left behind with a warning). An
    accepted remote Shutdown stops the server early; the block's body keeps running.

    Raises:
        TypeError: ``env`` is no env, or an option is unknown or mistyped.
        ValueError: an empty env list, a SAME_STEP vector env, or an ``env_thread``
            unknown or ``"caller"`` (that one needs :meth:`EnvServer.serve`).
        InvalidSpec: a bad address.
        OSError: the server cannot listen (the port is taken, say).
        RuntimeError: the server's thread ended before listening, raising nothing;
            or entered outside a Trio run (Trio's "must be called from async context").
        trio.Cancelled: the caller's scope was cancelled (while the server started,
            it is stopped first).
        Exception: on leaving the block, what the server raised while serving or
            stopping (only logged if the body raised first).
    """
    server = EnvServer(env, address, **options)
    async with serving_in_thread(server):
        yield server


def _request_arm(data: bytes) -> tuple[str, str, Any] | None:
    """A step or a reset request as ``(request_id, kind, body)``; ``None`` for the rest."""
    step = decode_step_arm(data)  # read in one pass: the usual request
    if step is not None:
        return step[0], "step", step[1]
    return decode_join_arm(data)


class JoinSession:
    """One Join stream: read requests, run them through the host, answer by request id.

    What 0.1.0 clients rely on (protocol notes §3.1, §3.5, §8, §9): Join sends
    its response headers at once (a tonic client waits for them before its first
    request); one Join at a time (FAILED_PRECONDITION for a second); every
    response echoes its request's id and carries ``endpoint_total_ns``; the
    stream ends OK after Close and after a non-recoverable error; a half-close
    or a lost stream lets in-flight env calls finish and drops the session's
    leftover episodes before the slot frees; a server that stops ends an open
    session with UNAVAILABLE.
    """

    def __init__(self, server: EnvServer, call: ServerCall) -> None:
        self._host = server._host
        self._call = call
        self._workers = server._workers
        self.released = trio.Event()  # the session's slot is free again
        self._finished = trio.Event()
        self._reading = trio.CancelScope()
        self._work: trio.Nursery | None = None
        self._ended = False  # a Close reply or a non-recoverable error went out
        self._closed_by_request = False
        # A request the server could not read (oversized, undecodable), or the server
        # stopping: the stream ends with this status once in-flight requests are answered.
        self._end_error: wire.GrpcError | None = None

    async def run(self) -> None:
        """Serve the stream until Close, an error, a half-close or :meth:`end_for_shutdown`.

        Cancellation: in-flight env calls are abandoned (they finish on their threads).

        Raises:
            GrpcError: the status the stream ends with when it does not end OK.
        """
        try:
            async with trio.open_nursery() as work:
                self._work = work
                work.start_soon(self._read)
                await self._finished.wait()
                self._reading.cancel()  # in-flight env calls are left to finish
        finally:
            if not self._closed_by_request:
                self._host.end_session()
        if self._end_error is not None and not self._ended:
            raise self._end_error

    def end_for_shutdown(self) -> None:
        """The server is stopping: end this stream with UNAVAILABLE once in-flight calls end."""
        if self._end_error is None:
            self._end_error = wire.GrpcError(wire.GrpcStatus.UNAVAILABLE, STOPPING_MESSAGE)
        self._finished.set()

    def abandon(self) -> None:
        """Stop waiting for in-flight env calls (stopping, past the drain bound); the
        calls themselves finish on their threads, unanswered."""
        if self._work is not None:
            self._work.cancel_scope.cancel()

    async def _read(self) -> None:
        workers, host, call = self._workers, self._host, self._call
        if workers is None:
            # Inline (env_thread="loop"): while this task waits for the next request,
            # the connection's reader answers it in its own turn (the env call runs
            # on this same thread either way).
            call.inline = self._serve_now
        try:
            with self._reading:
                while not self._ended:
                    data = await call.recv()
                    if data is None:
                        break  # half-close: answer what is in flight, then end
                    received = time.perf_counter_ns()
                    request = await decode_request(data, env_pb.JoinRequest)
                    if workers is None:
                        # Inline (env_thread="loop"): one request at a time, in order.
                        await self._answer(request, host.handle(request), received)
                    else:
                        # Admission fixes the request's place in line: here, in arrival order.
                        # Submitted here too: Trio starts tasks in no set order, and a
                        # ticket's thread must never wait behind a later one's.
                        ticket = host.admit(request)
                        job = workers.submit(host.run, ticket)
                        assert self._work is not None
                        self._work.start_soon(
                            self._process, workers, request, ticket, job, received
                        )
        except wire.GrpcError as exc:
            log.info("env Join stream refused a request: %s: %s", exc.status.name, exc.message)
            self._end_error = exc
        except CallLost as exc:
            log.debug("env Join stream read ended: %s", exc)
        finally:
            call.inline = None
            self._finished.set()

    def _serve_now(self, data: bytes) -> bool:
        """Answer one request in the reader's turn (``call.inline``); ``False`` for what
        the session's task must do: a large request (decoded on a worker thread), one
        that does not decode (the task raises the error), anything after the end."""
        if self._ended or self._finished.is_set() or len(data) >= THREAD_DECODE_BYTES:
            return False
        received = time.perf_counter_ns()
        # A step or a reset: no JoinRequest built for it.
        arm = _request_arm(data) if CODEC.fits(data) else None
        if arm is None:
            try:
                request = CODEC.decode(data, env_pb.JoinRequest)
            except wire.GrpcError:
                return False
            kind, body = betterproto2.which_one_of(request, "kind")
            request_id = request.request_id
        else:
            request_id, kind, body = arm
            request = None
        host = self._host
        # Admitted and run on this thread with nothing else admitted: no ticket to queue
        # (the scheduler's locks are for worker threads).
        done = host.call_now(kind, body, parts=True)
        if done is not None:
            self._answer_call(request_id, done, received)
        else:
            if request is None:
                request = env_pb.JoinRequest(request_id=request_id, **{kind: body})
            self._answer_now(request, host.handle(request), received)
        if self._ended:
            self._finished.set()  # the reader writes the reply before anything else
        return True

    async def _process(
        self,
        workers: EnvWorkers,
        request: env_pb.JoinRequest,
        ticket: Any,
        job: Any,
        received: int,
    ) -> None:
        host = self._host
        try:
            reply = await workers.result(job)
        except BaseException:
            host.discard(ticket)
            raise
        await self._answer(request, reply, received)

    async def _answer(
        self, request: env_pb.JoinRequest, reply: HostReply | None, received: int
    ) -> None:
        if not self._answer_now(request, reply, received):
            return
        try:
            await self._call.sent()
        except CallLost as exc:
            log.debug("env Join stream send failed: %s", exc)
            self._ended = True
        if self._ended:
            self._finished.set()

    def _answer_now(
        self, request: env_pb.JoinRequest, reply: HostReply | None, received: int
    ) -> bool:
        """Queue the reply to ``request``; ``True`` when one was queued (the caller
        writes it, then sets ``_finished`` if the stream ends with it)."""
        if reply is None or self._ended:
            return False
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
        return self._queue(lambda: CODEC.encode(response, env_pb.JoinResponse))

    def _answer_call(self, request_id: str, done: Call, received: int) -> bool:
        """:meth:`_answer_now` for a request run at once (``call_now``): the same reply,
        encoded from its parts (no ``JoinResponse`` or ``HostReply`` built per step)."""
        error = done.error
        kind, body = ("error", error) if error is not None else (done.kind, done.answer)
        if done.end_stream:
            self._ended = True
            self._closed_by_request = kind == "close"
        total = time.perf_counter_ns() - received
        # ENV_COUNTERS order; lane_skew_ns is a lane endpoint's, never set here.
        counters = (done.decode_ns, done.user_ns, done.encode_ns, 0, done.queue_ns)
        envelope = (request_id, total, counters)
        encode: Callable[..., bytes] = wire.encode_env_reply
        if type(body) is StepParts:  # a one-lane step, answered in parts
            encode = encode_step_parts
        elif kind == "step" and isinstance(body, env_pb.StepResponse):  # a one-env step
            encode = encode_step_reply
        else:
            return self._queue(lambda: CODEC.checked(encode(kind, body, *envelope)))
        answer: Any = body  # the step's, whichever encoder (a lambda forgets the narrowing)
        return self._queue(lambda: CODEC.checked(encode(answer, *envelope)))

    def _queue(self, encode: Callable[[], bytes]) -> bool:
        """Queue the reply ``encode()`` gives; ``False`` when it could not be (the
        session ends: a reply over the size limit, or the stream is gone)."""
        try:
            self._call.send_now(encode())
        except wire.GrpcError as exc:  # a reply over the size limit
            self._end_error = exc
            self._ended = False
            self._finished.set()
            return False
        except CallLost as exc:
            log.debug("env Join stream send failed: %s", exc)
            self._ended = True
            self._finished.set()
            return False
        return True
