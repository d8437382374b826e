"""Raw Join streams (bytes in, bytes out) and servers running in a background thread.

For the fuzz and soak tests:

* :class:`RawStream` opens ``EnvService/Join`` or ``ModelService/Join`` with a
  pass-through codec, so a test can send any bytes and read every reply,
  including the gRPC status the stream ends with. It runs on the Trio-native
  client connection (no asyncio).
* :class:`ServerThread` runs ``serve_env``/``serve_model`` in its own thread
  and Trio run, so many short ``trio.run`` calls (one per hypothesis example)
  can talk to one long-lived server, and the test can check it never died.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import grpclib.const
import trio

from rlmesh_trio import _wire as wire
from rlmesh_trio.transport.client._channel import ClientConnection
from rlmesh_trio.transport.client._conn import Connection

__all__ = ["ENV_JOIN", "MODEL_JOIN", "RawStream", "ServerThread", "StreamEnd"]

ENV_JOIN = "/rlmesh.env.v1.EnvService/Join"
MODEL_JOIN = "/rlmesh.model.v1.ModelService/Join"


class StreamEnd(Exception):
    """The server ended the stream; ``status`` is its gRPC status (``OK`` for a clean end)."""

    def __init__(self, status: grpclib.const.Status, message: str | None) -> None:
        super().__init__(f"{status.name}: {message}")
        self.status = status
        self.message = message


class _Collector:
    """A stream handler that queues what arrives, for :class:`RawStream` to read in order."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.headers: list[tuple[str, str]] | None = None
        self.end: StreamEnd | None = None
        self.changed = trio.Event()

    def _wake(self) -> None:
        self.changed.set()

    def on_headers(self, headers: list[tuple[str, str]]) -> None:
        self.headers = headers
        self._wake()

    def on_message(self, data: bytes) -> None:
        self.messages.append(data)
        self._wake()

    def on_end(self, status: wire.GrpcStatus | None, message: str | None) -> None:
        code = grpclib.const.Status(int(status)) if status is not None else None
        self.end = StreamEnd(code or grpclib.const.Status.UNAVAILABLE, message)
        self._wake()

    def on_lost(self, detail: str) -> None:
        self.end = StreamEnd(grpclib.const.Status.UNAVAILABLE, f"reset: {detail}")
        self._wake()

    def replies_owed(self) -> bool:
        return self.end is None


class RawStream:
    """One bidirectional Join stream of raw protobuf bytes (on the Trio-native client)."""

    def __init__(self, address: str, path: str, metadata: dict[str, str] | None = None) -> None:
        self.address = address
        self.path = path
        self.metadata = metadata
        self._client = ClientConnection(address)
        self._conn: Connection | None = None
        self._stream_id = 0
        self._seen = _Collector()
        self._half_closed = False

    async def open(self) -> None:
        self._conn = await self._client.connect()
        self._stream_id = self._conn.open_stream(self.path, self._seen, metadata=self.metadata)
        await self._conn.flush()

    async def _wait(self) -> None:
        self._seen.changed = trio.Event()
        await self._seen.changed.wait()

    async def headers(self) -> None:
        """Wait for the response headers; raises :class:`StreamEnd` if the server refused."""
        seen = self._seen
        while seen.headers is None and seen.end is None:
            await self._wait()
        trailers_only = seen.headers is not None and "grpc-status" in dict(seen.headers)
        while trailers_only and seen.end is None:
            await self._wait()
        if seen.end is not None and not seen.messages:
            raise seen.end

    async def send(self, payload: bytes) -> None:
        assert self._conn is not None
        if self._seen.end is not None:
            return  # the server already ended the stream: it would ignore the bytes
        self._conn.send(self._stream_id, payload)
        await self._conn.flush()

    async def recv(self) -> bytes:
        """The next message; raises :class:`StreamEnd` when the server ended the stream."""
        while True:
            if self._seen.messages:
                return self._seen.messages.pop(0)
            if self._seen.end is not None:
                raise self._seen.end
            await self._wait()

    async def half_close(self) -> None:
        if self._conn is not None and not self._half_closed:
            self._half_closed = True
            self._conn.end_stream(self._stream_id)
            await self._conn.flush()

    async def drain(self) -> tuple[list[bytes], StreamEnd]:
        """Half-close, then read until the server ends the stream: leftovers and the status."""
        await self.half_close()
        leftovers: list[bytes] = []
        while True:
            try:
                leftovers.append(await self.recv())
            except StreamEnd as ended:
                return leftovers, ended

    async def close(self) -> None:
        self._client.close()


class ServerThread:
    """Run ``serve(…)`` (an async context manager yielding a server) in a thread of its own.

    ``start()`` returns the bound address; ``stop()`` leaves the context
    manager and joins the thread. ``error`` holds whatever ended the thread's
    Trio run early (``None`` while it serves normally).
    """

    def __init__(self, serve: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._serve = serve
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="server-thread", daemon=True)
        self.error: BaseException | None = None
        self.server: Any = None

    def _main(self) -> None:
        try:
            trio.run(self._serve_until_stopped)
        except BaseException as exc:
            self.error = exc
            self._ready.put(exc)

    async def _serve_until_stopped(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with self._serve() as server:
            self.server = server
            self._ready.put(server.address)
            await self._stop.wait()

    def start(self, timeout: float = 30.0) -> str:
        self._thread.start()
        got = self._ready.get(timeout=timeout)
        if isinstance(got, BaseException):
            raise RuntimeError("the server thread failed to start") from got
        return got

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def stop(self, timeout: float = 30.0) -> None:
        if self._token is not None and self._stop is not None and self._thread.is_alive():
            stop = self._stop
            trio.from_thread.run_sync(stop.set, trio_token=self._token)
        self._thread.join(timeout)
