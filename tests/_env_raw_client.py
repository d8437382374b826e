"""A minimal raw Join client for env server tests (grpclib, called through the bridge).

Tests need the protocol's corners (headers before any message, request ids,
stream ends, gRPC statuses), so this talks grpclib directly instead of going
through RemoteEnv.
"""

from __future__ import annotations

from typing import Any

import grpclib.client
import grpclib.const
import trio
from grpclib.exceptions import GRPCError, StreamTerminatedError

from rlmesh_trio._protocol import core_pb, env_pb
from rlmesh_trio.transport._address import parse_address

from . import _asyncio_bridge as bridge
from ._faults_raw import RawStream, StreamEnd

_SERVICE = "/rlmesh.env.v1.EnvService"


def _channel(address: str) -> grpclib.client.Channel:
    parsed = parse_address(address)
    if parsed.path is not None:
        return grpclib.client.Channel(path=parsed.path)
    return grpclib.client.Channel(parsed.host, parsed.port)


class RawJoin:
    """One Join stream of our env service, driven message by message (on the Trio-native
    raw stream of ``_faults_raw``); a non-OK end is raised as grpclib's ``GRPCError``."""

    def __init__(self, address: str, metadata: dict[str, str] | None = None) -> None:
        self.address = address
        self.metadata = metadata
        self._raw = RawStream(address, f"{_SERVICE}/Join", metadata)
        self._end: StreamEnd | None = None
        self._n = 0

    async def open(self) -> None:
        await self._raw.open()

    async def headers(self) -> None:
        try:
            await self._raw.headers()
        except StreamEnd as ended:
            raise _error(ended) from None

    async def send(self, request_id: str | None = None, **kind: Any) -> str:
        if request_id is None:
            self._n += 1
            request_id = f"grpc-req-{self._n}"
        await self._raw.send(bytes(env_pb.JoinRequest(request_id=request_id, **kind)))
        return request_id

    async def recv(self) -> env_pb.JoinResponse | None:
        try:
            return env_pb.JoinResponse().parse(await self._raw.recv())
        except StreamEnd as ended:
            self._end = ended
            if ended.status is grpclib.const.Status.OK:
                return None
            raise _error(ended) from None

    async def rpc(self, **kind: Any) -> env_pb.JoinResponse:
        await self.send(**kind)
        response = await self.recv()
        assert response is not None
        return response

    async def half_close(self) -> None:
        await self._raw.half_close()

    async def trailers(self) -> StreamEnd:
        """Half-close and wait for the server's status; a non-OK one raises ``GRPCError``."""
        if self._end is None:
            _leftovers, self._end = await self._raw.drain()
        if self._end.status is not grpclib.const.Status.OK:
            raise _error(self._end)
        return self._end

    async def close(self) -> None:
        await self._raw.close()


async def rpc_once_free(
    address: str, timeout: float = 5.0, **kind: Any
) -> tuple[RawJoin, env_pb.JoinResponse]:
    """Open a Join and send one request, again while the single slot is still held by a
    session that is ending (refused or reset); the open Join and its reply.

    The slot frees once the old stream's handler has returned, which the server does
    not announce: so this retries (every 10 ms, for at most ``timeout`` seconds).

    Raises:
        trio.TooSlowError: still refused after ``timeout`` seconds.
    """
    with trio.fail_after(timeout):
        while True:
            join = RawJoin(address)
            await join.open()
            try:
                return join, await join.rpc(**kind)
            except (GRPCError, StreamTerminatedError):  # refused while the slot is busy
                await join.close()
                await trio.sleep(0.01)


def _error(ended: StreamEnd) -> GRPCError:
    return GRPCError(ended.status, ended.message)


async def unary(address: str, method: str, request: Any, reply_type: Any, **kw: Any) -> Any:
    async def _call() -> Any:
        channel = _channel(address)
        try:
            async with channel.request(
                f"{_SERVICE}/{method}",
                grpclib.const.Cardinality.UNARY_UNARY,
                type(request),
                reply_type,
                **kw,
            ) as stream:
                await stream.send_message(request, end=True)
                return await stream.recv_message()
        finally:
            channel.close()

    return await bridge.call(_call)


async def handshake(address: str, generation: str = "rlmesh-wire-v1", **kw: Any) -> Any:
    request = env_pb.HandshakeRequest(
        base=core_pb.HandshakeRequest(
            protocol_generation=generation, supported_workflow_editions=["2026.06"]
        )
    )
    return await unary(address, "Handshake", request, env_pb.HandshakeResponse, **kw)
