"""A minimal raw Join client for env server tests (grpclib, called through the bridge).

Tests need the protocol's corners (headers before any message, request ids,
stream ends, gRPC statuses), so this talks grpclib directly instead of going
through RemoteEnv.
"""

from __future__ import annotations

from typing import Any

import grpclib.client
import grpclib.const
from grpclib.exceptions import GRPCError, StreamTerminatedError

from rlmesh_trio._wire import core_pb, env_pb
from rlmesh_trio.transport._address import parse_address

from . import _asyncio_bridge as bridge

_SERVICE = "/rlmesh.env.v1.EnvService"


def _channel(address: str) -> grpclib.client.Channel:
    parsed = parse_address(address)
    if parsed.path is not None:
        return grpclib.client.Channel(path=parsed.path)
    return grpclib.client.Channel(parsed.host, parsed.port)


class RawJoin:
    """One Join stream; every method is Trio-side."""

    def __init__(self, address: str, metadata: dict[str, str] | None = None) -> None:
        self.address = address
        self.metadata = metadata
        self.channel: grpclib.client.Channel | None = None
        self.stream: Any = None
        self._cm: Any = None
        self._n = 0

    async def open(self) -> None:
        async def _open() -> None:
            self.channel = _channel(self.address)
            self._cm = self.channel.request(
                f"{_SERVICE}/Join",
                grpclib.const.Cardinality.STREAM_STREAM,
                env_pb.JoinRequest,
                env_pb.JoinResponse,
                metadata=self.metadata,
            )
            self.stream = await self._cm.__aenter__()
            await self.stream.send_request()

        await bridge.call(_open)

    async def headers(self) -> Any:
        try:
            await bridge.call(self.stream.recv_initial_metadata)
        except StreamTerminatedError as exc:
            raise self._status_or(exc) from None
        return self.stream.initial_metadata

    async def send(self, request_id: str | None = None, **kind: Any) -> str:
        if request_id is None:
            self._n += 1
            request_id = f"grpc-req-{self._n}"
        await bridge.call(
            self.stream.send_message, env_pb.JoinRequest(request_id=request_id, **kind)
        )
        return request_id

    async def recv(self) -> env_pb.JoinResponse | None:
        try:
            return await bridge.call(self.stream.recv_message)
        except StreamTerminatedError as exc:
            raise self._status_or(exc) from None

    def _status_or(self, exc: StreamTerminatedError) -> Exception:
        # grpclib servers follow a non-OK status with RST_STREAM(NO_ERROR) while our
        # half is open; a grpclib client that reads both at once reports the reset.
        # The status the trailers carried is what the server said.
        from ._faults_raw import status_from_trailers

        ended = status_from_trailers(self.stream)
        return exc if ended is None else GRPCError(ended.status, ended.message)

    async def rpc(self, **kind: Any) -> env_pb.JoinResponse:
        await self.send(**kind)
        response = await self.recv()
        assert response is not None
        return response

    async def half_close(self) -> None:
        await bridge.call(self.stream.end)

    async def trailers(self) -> Any:
        async def _trailers() -> Any:
            try:
                await self.stream.end()  # grpclib reads trailers only after our side ended
            except Exception:
                pass
            await self.stream.recv_trailing_metadata()
            return self.stream.trailing_metadata

        return await bridge.call(_trailers)

    async def close(self) -> None:
        async def _close() -> None:
            try:
                if self._cm is not None:
                    await self._cm.__aexit__(None, None, None)
            except (GRPCError, Exception):
                pass
            finally:
                if self.channel is not None:
                    self.channel.close()

        await bridge.call(_close)


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
