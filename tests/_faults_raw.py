"""Raw Join streams (bytes in, bytes out) and servers running in a background thread.

For the fuzz and soak tests:

* :class:`RawStream` opens ``EnvService/Join`` or ``ModelService/Join`` with a
  pass-through codec, so a test can send any bytes and read every reply,
  including the gRPC status the stream ends with. Trio side; every call goes
  through the transport's bridge.
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

import grpclib.client
import grpclib.const
import trio
from grpclib.exceptions import GRPCError, StreamTerminatedError
from grpclib.metadata import decode_grpc_message

from rlmesh_trio.transport import _bridge as bridge
from rlmesh_trio.transport._address import parse_address
from rlmesh_trio.transport._channel import RawCodec

__all__ = ["ENV_JOIN", "MODEL_JOIN", "RawStream", "ServerThread", "StreamEnd"]

ENV_JOIN = "/rlmesh.env.v1.EnvService/Join"
MODEL_JOIN = "/rlmesh.model.v1.ModelService/Join"


class StreamEnd(Exception):
    """The server ended the stream; ``status`` is its gRPC status (``OK`` for a clean end)."""

    def __init__(self, status: grpclib.const.Status, message: str | None) -> None:
        super().__init__(f"{status.name}: {message}")
        self.status = status
        self.message = message


def status_from_trailers(stream: Any) -> StreamEnd | None:
    """The status a grpclib client stream's trailers (or trailers-only headers) carried."""
    h2_stream = getattr(stream, "_stream", None)
    trailers = getattr(h2_stream, "trailers", None)
    if trailers is None:
        headers = getattr(h2_stream, "headers", None)
        if headers is None or "grpc-status" not in dict(headers):
            return None
        trailers = headers  # a trailers-only response
    fields = dict(trailers)
    message = fields.get("grpc-message")
    return StreamEnd(
        grpclib.const.Status(int(fields.get("grpc-status", "0"))),
        decode_grpc_message(message) if message is not None else None,
    )


class RawStream:
    """One bidirectional Join stream of raw protobuf bytes."""

    def __init__(self, address: str, path: str, metadata: dict[str, str] | None = None) -> None:
        self.address = address
        self.path = path
        self.metadata = metadata
        self._channel: grpclib.client.Channel | None = None
        self._cm: Any = None
        self._stream: Any = None

    async def open(self) -> None:
        async def _open() -> None:
            parsed = parse_address(self.address)
            self._channel = grpclib.client.Channel(parsed.host, parsed.port, codec=RawCodec())
            self._cm = self._channel.request(
                self.path,
                grpclib.const.Cardinality.STREAM_STREAM,
                bytes,
                bytes,
                metadata=self.metadata,
            )
            self._stream = await self._cm.__aenter__()
            await self._stream.send_request()

        await bridge.call(_open)

    async def headers(self) -> None:
        """Wait for the response headers; raises :class:`StreamEnd` if the server refused."""

        async def _headers() -> None:
            await self._stream.recv_initial_metadata()

        try:
            await bridge.call(_headers)
        except GRPCError as exc:
            raise StreamEnd(exc.status, exc.message) from None
        except StreamTerminatedError as exc:
            raise self._reset(exc) from None

    async def send(self, payload: bytes) -> None:
        await bridge.call(self._stream.send_message, payload)

    async def recv(self) -> bytes:
        """The next message; raises :class:`StreamEnd` when the server ended the stream."""

        async def _recv() -> bytes | None:
            data = await self._stream.recv_message()
            return None if data is None else bytes(data)

        try:
            data = await bridge.call(_recv)
        except GRPCError as exc:
            raise StreamEnd(exc.status, exc.message) from None
        except StreamTerminatedError as exc:
            raise self._reset(exc) from None
        if data is not None:
            return data
        raise await self._ending()

    def _reset(self, exc: StreamTerminatedError) -> StreamEnd:
        # grpclib servers follow their trailers with RST_STREAM(NO_ERROR) when our half is
        # still open, and the client may see the reset first: read the status the
        # trailers carried. Without trailers it was a bare reset: UNAVAILABLE, "reset".
        ended = self._status_from_trailers()
        if ended is not None:
            return ended
        return StreamEnd(grpclib.const.Status.UNAVAILABLE, f"reset: {exc}")

    def _status_from_trailers(self) -> StreamEnd | None:
        return status_from_trailers(self._stream)

    async def _ending(self) -> StreamEnd:
        async def _trailers() -> StreamEnd:
            try:
                await self._stream.end()
            except Exception:
                pass
            try:
                await self._stream.recv_trailing_metadata()
            except GRPCError as exc:
                return StreamEnd(exc.status, exc.message)
            except StreamTerminatedError as exc:
                return StreamEnd(grpclib.const.Status.UNAVAILABLE, str(exc))
            return StreamEnd(grpclib.const.Status.OK, None)

        return await bridge.call(_trailers)

    async def half_close(self) -> None:
        async def _end() -> None:
            try:
                await self._stream.end()
            except Exception:
                pass  # the server already ended the stream

        await bridge.call(_end)

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
        async def _close() -> None:
            try:
                if self._cm is not None:
                    await self._cm.__aexit__(None, None, None)
            except Exception:
                pass
            finally:
                if self._channel is not None:
                    self._channel.close()

        with trio.CancelScope(shield=True):
            await bridge.call(_close)


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
