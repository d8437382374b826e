"""``EnvServer``: serve a gymnasium env over rlmesh-wire-v1 gRPC, as rlmesh 0.1.0 does.

The semantics (episodes, lanes, NEXT_STEP rolls, errors) live in the env host
(:mod:`rlmesh_trio._envhost`), the Join sessions in :mod:`._env_join`, what
the model server shares in :mod:`._server_base`. Shutdown is refused unless
``allow_remote_shutdown`` (or the environment variable
``RLMESH_ALLOW_REMOTE_SHUTDOWN=1|true``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import ssl as ssl_module
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, TypeVar

import grpclib.server
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from .._envhost import SUPPORTED_EDITIONS, EnvHost, make_host
from .._signals import SERVER_SIGNALS, on_first_signal
from .._wire import core_pb, env_pb
from . import _server_loop as aio
from ._env_join import JoinSession
from ._handshake import ENV_COMPONENT
from ._server_base import ServerBase

__all__ = ["BUSY_MESSAGE", "EnvServer", "serve_env"]

T = TypeVar("T")

BUSY_MESSAGE = (
    "environment already has an active Join session; only one client may be connected at a time"
)

#: Bounds on stopping: in-flight env calls to drain, then the env's own close().
DRAIN_TIMEOUT = 5.0
CLOSE_TIMEOUT = 5.0
# How long stopping waits for an open Join session to end by itself.
_CLOSE_GRACE = 0.5

_ENV_THREADS = ("auto", "loop", "worker", "caller")


def _check_env_thread(mode: str) -> None:
    if mode not in _ENV_THREADS:
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
        ValueError: an unknown ``env_thread``.
        InvalidSpec: a bad ``address`` (see :func:`~._address.parse_address`).
    """

    kind = "env"
    service = "rlmesh.env.v1.EnvService"
    messages: ClassVar[Any] = env_pb
    component = ENV_COMPONENT
    shutdown_refusal = "remote shutdown is disabled for this environment endpoint"
    # Larger windows than HTTP/2's 64 KiB keep image observations flowing.
    http2_window = 16 * 1024 * 1024

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
        _check_env_thread(env_thread)
        if allow_remote_shutdown is None:
            flag = os.environ.get("RLMESH_ALLOW_REMOTE_SHUTDOWN", "").strip().lower()
            allow_remote_shutdown = flag in ("1", "true")
        super().__init__(address, token=token, ssl=ssl, allow_remote_shutdown=allow_remote_shutdown)
        self.host: EnvHost = (
            env if isinstance(env, EnvHost) else make_host(env, close_env=close_env)
        )
        self.env_thread = env_thread
        self._session: JoinSession | None = None  # the one open Join stream (asyncio side)
        self._workers: EnvWorkers | None = None  # None while serving inline

    @property
    def contract(self) -> core_pb.EnvContract:
        return self.host.contract

    def close_bound(self) -> float:
        """Stopping drains in-flight env calls, then closes the env, each bounded."""
        return DRAIN_TIMEOUT + CLOSE_TIMEOUT

    # -- ways to run -----------------------------------------------------------------------

    def refuse_thread(self, what: str) -> None:
        if self.env_thread == "caller":
            raise ValueError(f'{what} cannot use env_thread="caller"; use EnvServer.serve()')

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

        * ``"loop"``: inline on the serving thread (the caller's), which runs a
          plain asyncio loop: no thread hand-off, the cheapest per step; but while
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
        mode = self.env_thread if env_thread is None else env_thread
        _check_env_thread(mode)
        self._reset_stop()
        self._serve_mode(mode, self._announcer(ready_fd, announce_as))

    def serve_blocking(self, announce: Callable[[], None]) -> None:
        """Serve on the calling thread until stopped, ``announce()`` once listening
        (what ``serve_env``, ``run`` and ``start`` run on their thread).

        Raises:
            ValueError: ``env_thread="caller"`` (that mode needs the caller's thread).
        """
        if self.env_thread == "caller":
            raise ValueError('env_thread="caller" is for the blocking serve() only')
        self._serve_mode(self.env_thread, announce)

    def _serve_mode(self, env_thread: str, announce: Callable[[], None]) -> None:
        if env_thread == "auto":
            env_thread = "worker" if self.host.concurrent else "loop"
        if env_thread == "caller":
            self._serve_on_caller(announce)
            return
        workers = None if env_thread == "loop" else EnvWorkers(self.host.num_envs + 1)
        try:
            self._run_loop(announce, workers)
        finally:
            if workers is not None:
                workers.stop()  # idempotent; covers a failed start (e.g. the port is taken)

    def _serve_on_caller(self, announce: Callable[[], None]) -> None:
        """``env_thread="caller"``: the server on a background thread, env calls here.

        The first SIGINT/SIGTERM (main thread) stops the server gracefully (an env
        call in progress is not interrupted); the previous handlers come back for
        anything after that."""
        pool = EnvWorkers(0)

        def on_signal(signum: int) -> None:
            self._note_signal(signum)  # a reason: stopping waits for an open session
            self.stop_threadsafe()  # a signal before the loop's start stops it once up

        serving = aio.ServingThread(
            self,
            on_listening=announce,
            on_ended=pool.wake,
            serve=lambda ready: self._run_loop(ready, pool),
        )
        with on_first_signal(SERVER_SIGNALS, on_signal):
            serving.thread.start()
            try:
                pool.work_here(serving.ended)
            finally:
                serving.thread.join()
        if serving.failure is not None:
            raise serving.failure

    # -- asyncio side ----------------------------------------------------------------------

    def _run_loop(self, announce: Callable[[], None], workers: EnvWorkers | None) -> None:
        """The blocking serve on a plain asyncio loop; env calls inline (``workers`` is
        None) or on worker threads that wake the loop with ``call_soon_threadsafe``."""

        async def serve() -> None:
            if workers is not None:
                workers.bind_loop(aio.running_loop())
            self._workers = workers
            await self._serve_plain_asyncio(announce)

        aio.run_plain_asyncio(serve)

    async def _handshake(self, message: env_pb.HandshakeRequest) -> env_pb.HandshakeResponse:
        host = self.host
        reply = self._handshake_reply(
            message.base, capabilities=host.capabilities, editions=SUPPORTED_EDITIONS
        )
        contract = host.contract if reply.compatible else None
        return env_pb.HandshakeResponse(base=reply, env_contract=contract)

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        if self._session is not None:
            raise GRPCError(Status.FAILED_PRECONDITION, BUSY_MESSAGE)
        session = self._session = JoinSession(self, stream)
        try:
            # Headers first: a 0.1.0 client sends nothing until it has them (pitfall 1).
            await stream.send_initial_metadata()
            await session.run()
        finally:
            self._session = None
            session.released.set()

    async def _close(self) -> None:
        """Stop serving: let an open session end by itself for a moment (after a remote
        Shutdown or a signal, until it is idle; otherwise briefly, so a client that has
        just half-closed sees its stream end normally), then end what is left with
        UNAVAILABLE, stop listening, shut the connections down and close the env."""
        listener, self._listener = self._listener, None
        if listener is not None:
            loop = aio.running_loop()
            deadline = loop.time() + DRAIN_TIMEOUT
            asked = self._shutdown_reason is not None
            session = self._session
            if session is not None and not await _within(
                session.released, 0.8 * DRAIN_TIMEOUT if asked else _CLOSE_GRACE
            ):
                session.end_for_shutdown()
                # An ended session still waits for its in-flight env calls (bounded).
                if not await _within(session.released, max(0.05, deadline - loop.time())):
                    session.abandon()
            await listener.close(1.0)
        if self._workers is None:
            self.host.close()
        else:
            await aio.asyncio_wait_for(self._workers.submit(self.host.close), CLOSE_TIMEOUT)

    def _is_stopping(self) -> bool:
        return self._listener is None or (self._stop is not None and self._stop.is_set())


async def _within(event: aio.AsyncioEvent, seconds: float) -> bool:
    """Whether ``event`` is set within ``seconds``."""
    try:
        await aio.asyncio_wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


_STOP = object()
_WAKE = object()


class EnvWorkers:
    """A FIFO of blocking env calls and ``size`` daemon threads that run them; with
    ``size=0`` another thread runs them (:meth:`work_here`: the one that called a
    blocking ``serve()``, for envs tied to the thread that made them).

    Leaner than ``loop.run_in_executor`` (a concurrent.futures future and two
    hops per call): a finished job resolves its waiter through the serving
    loop's ``call_soon_threadsafe``. Jobs start in submission order, which the
    env host's scheduler relies on (an earlier request always gets a thread
    before a later one that waits for it).
    """

    def __init__(self, size: int) -> None:
        self._schedule: Callable[..., Any] | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"rlmesh-trio-env-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def bind_loop(self, loop: aio.AsyncioLoop) -> None:
        """Report finished jobs to a plain asyncio loop (``call_soon_threadsafe``)."""
        self._schedule = loop.call_soon_threadsafe

    def submit(self, fn: Callable[..., T], *args: Any) -> aio.AsyncioFuture[T]:
        """Run ``fn(*args)`` on a worker; the returned future resolves on the event loop.

        Asyncio side only. Cancelling the future does not stop the call (an env
        call cannot be interrupted); its result is then dropped.

        Raises:
            RuntimeError: the pool is stopped.
        """
        if self._stopped:
            raise RuntimeError("the env worker pool is stopped")
        future: aio.AsyncioFuture[T] = aio.running_loop().create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        self._jobs.put((fn, args, settle))
        return future

    def stop(self) -> None:
        """Let idle threads exit; a thread inside a slow env call exits when it returns."""
        if self._stopped:
            return
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(_STOP)

    def wake(self) -> None:
        """Unblock :meth:`work_here` so it can notice that it should return."""
        self._jobs.put(_WAKE)

    def work_here(self, until: threading.Event) -> None:
        """Run jobs on the calling thread until ``until`` is set (blocking)."""
        self._work(until)

    def _work(self, until: threading.Event | None = None) -> None:
        while until is None or not until.is_set():
            job = self._jobs.get()
            if job is _STOP:
                return
            if job is not _WAKE:
                self._run(*job)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], settle: Any) -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:
            result, error = None, exc
        schedule = self._schedule
        if schedule is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed; nobody waits any more
                schedule(settle, result, error)


@contextlib.asynccontextmanager
async def serve_env(
    env: Any, address: str = "127.0.0.1:0", **options: Any
) -> AsyncIterator[EnvServer]:
    """Serve ``env`` over gRPC from a Trio program; yields the server once it is listening.

    ``env`` and ``options`` are :class:`EnvServer`'s (``env_thread="caller"`` is
    refused: it needs :meth:`EnvServer.serve`). The server runs on a thread of
    its own with a plain asyncio loop, so the caller's run needs no asyncio.
    Thread safety: from then on the env belongs to the server (called and
    closed on its threads, as ``env_thread`` says); do not use it elsewhere.

    Cancellation: leaving the block (normally, by error or by cancellation)
    stops the server: in-flight env calls are drained and the env closed, each
    bounded, while the caller waits shielded for at most the server's close
    bound plus a second (a thread stuck in an env call is left behind with a
    warning). An accepted remote Shutdown stops the server early; the block's
    body keeps running.

    Raises:
        InvalidSpec: a bad address.
        ValueError: an ``env_thread`` this cannot serve.
        OSError: the server cannot listen (the port is taken, say).
    """
    server = EnvServer(env, address, **options)
    server.refuse_thread("serve_env")
    async with aio.serving_in_thread(server):
        yield server
