"""grpclib service stubs and bases for the wire-v1 services, for tests only.

The package's generated modules hold messages only (issue 22: no grpclib at
runtime). Tests that use grpclib as an independent gRPC peer, a client
(``ModelServiceStub``) or a server (``EnvServiceBase``), take them from here;
``env_pb`` and ``model_pb`` are the package's message modules plus these.
"""

from __future__ import annotations

import types
from typing import Any

import grpclib.client
import grpclib.const
import grpclib.server

from rlmesh_trio._protocol import env_pb as _env_messages
from rlmesh_trio._protocol import model_pb as _model_messages

__all__ = ["env_pb", "model_pb"]

_UNARY = ("Handshake", "Shutdown")


def _stub_class(service: str, messages: types.ModuleType) -> type:
    class Stub:
        """A grpclib client for one service: ``handshake``, ``shutdown``, ``join``."""

        def __init__(self, channel: grpclib.client.Channel) -> None:
            self.channel = channel

        async def _unary(self, method: str, request: Any, **options: Any) -> Any:
            async with self.channel.request(
                f"/{service}/{method}",
                grpclib.const.Cardinality.UNARY_UNARY,
                getattr(messages, f"{method}Request"),
                getattr(messages, f"{method}Response"),
                **options,
            ) as stream:
                await stream.send_message(request, end=True)
                return await stream.recv_message()

        async def handshake(self, request: Any, **options: Any) -> Any:
            return await self._unary("Handshake", request, **options)

        async def shutdown(self, request: Any, **options: Any) -> Any:
            return await self._unary("Shutdown", request, **options)

        def join(self, **options: Any) -> Any:
            return self.channel.request(
                f"/{service}/Join",
                grpclib.const.Cardinality.STREAM_STREAM,
                messages.JoinRequest,
                messages.JoinResponse,
                **options,
            )

    return Stub


def _base_class(service: str, messages: types.ModuleType) -> type:
    class Base:
        """A grpclib servable: subclasses implement ``handshake``/``shutdown`` (unary)
        and ``join(stream)``; unimplemented methods answer UNIMPLEMENTED."""

        async def handshake(self, message: Any) -> Any:
            raise grpclib.GRPCError(grpclib.const.Status.UNIMPLEMENTED)

        async def shutdown(self, message: Any) -> Any:
            raise grpclib.GRPCError(grpclib.const.Status.UNIMPLEMENTED)

        async def join(self, stream: Any) -> None:
            raise grpclib.GRPCError(grpclib.const.Status.UNIMPLEMENTED)

        def _unary_handler(self, name: str) -> Any:
            async def handle(stream: grpclib.server.Stream[Any, Any]) -> None:
                request = await stream.recv_message()
                await stream.send_message(await getattr(self, name.lower())(request))

            return handle

        def __mapping__(self) -> dict[str, grpclib.const.Handler]:
            mapping = {
                f"/{service}/{name}": grpclib.const.Handler(
                    self._unary_handler(name),
                    grpclib.const.Cardinality.UNARY_UNARY,
                    getattr(messages, f"{name}Request"),
                    getattr(messages, f"{name}Response"),
                )
                for name in _UNARY
            }
            mapping[f"/{service}/Join"] = grpclib.const.Handler(
                self.join,
                grpclib.const.Cardinality.STREAM_STREAM,
                messages.JoinRequest,
                messages.JoinResponse,
            )
            return mapping

    return Base


def _with_services(messages: types.ModuleType, prefix: str, service: str) -> types.ModuleType:
    module = types.ModuleType(messages.__name__)
    module.__dict__.update(messages.__dict__)
    setattr(module, f"{prefix}ServiceStub", _stub_class(service, messages))
    setattr(module, f"{prefix}ServiceBase", _base_class(service, messages))
    return module


env_pb = _with_services(_env_messages, "Env", "rlmesh.env.v1.EnvService")
model_pb = _with_services(_model_messages, "Model", "rlmesh.model.v1.ModelService")
