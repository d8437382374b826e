"""The seams between a route driver and its two endpoints.

``RuntimeEnv`` and ``RuntimeModel`` are what the driver talks to. The gRPC
clients (``rlmesh_trio.transport``), the in-process adapters and the fakes of
``rlmesh_trio.testing`` all implement them. Requests and responses are the
wire-v1 protobuf messages themselves, so a remote peer's payloads pass
through the driver without being decoded.

Cancellation: every method may be cancelled by the caller's Trio cancel
scope. After a cancelled ``reset``/``step``/``predict`` the endpoint is only
good for ``close``/``release_adapter`` (which the driver calls shielded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar, runtime_checkable

import attrs

from ._wire import core_pb, env_pb, model_pb

__all__ = ["EndpointInfo", "Reply", "RuntimeEnv", "RuntimeModel"]

T = TypeVar("T")


def _str_tuple(values: Iterable[str]) -> tuple[str, ...]:
    # A typed converter: mypy's attrs plugin cannot solve a bare ``converter=tuple``.
    return tuple(values)


@attrs.frozen
class EndpointInfo:
    """What a handshake (or an in-process endpoint) tells the runtime about a peer.

    ``contract`` is set for env endpoints only. ``editions`` is the peer's
    CAN list, ``preferred_edition`` its WANT (``None`` when undeclared).
    """

    label: str
    editions: tuple[str, ...] = attrs.field(converter=_str_tuple)
    preferred_edition: str | None = None
    capabilities: Mapping[str, str] = attrs.field(factory=dict)
    contract: core_pb.EnvContract | None = None
    peer: core_pb.PeerInfo | None = None

    def has_capability(self, name: str) -> bool:
        return self.capabilities.get(name) == "true"


@attrs.frozen(slots=True)
class Reply(Generic[T]):
    """A response plus per-operation telemetry.

    ``telemetry`` maps metric names of the telemetry table (``endpoint.total``,
    ``endpoint.user``, ``request.bytes``, ...) to a value in the metric's unit
    (milliseconds, bytes or a count). The driver adds ``rpc.total`` itself.
    """

    response: T
    telemetry: Mapping[str, float] = attrs.field(factory=dict)


@runtime_checkable
class RuntimeEnv(Protocol):
    """An environment endpoint as a route sees it."""

    async def connect(self) -> EndpointInfo:
        """Handshake: learn the contract, editions and capabilities. Takes no session slot."""
        ...

    async def configure(self, edition: str) -> None:
        """Open the session and pin the workflow edition (the first Join message)."""
        ...

    async def reset(self, request: env_pb.ResetRequest) -> Reply[env_pb.ResetResponse]: ...

    async def step(self, request: env_pb.StepRequest) -> Reply[env_pb.StepResponse]: ...

    async def close(self, timeout: float) -> list[env_pb.EpisodeMetadata]:
        """Close the env's episodes (a Close request) and return the final episodes.

        Called only for routes with ``close_env_on_end``; bounded by ``timeout`` seconds.
        """
        ...

    async def aclose(self) -> None:
        """Release local resources (half-close the stream, drop the connection). Idempotent."""
        ...


@runtime_checkable
class RuntimeModel(Protocol):
    """A model endpoint as a route sees it."""

    async def connect(self) -> EndpointInfo:
        """Handshake: learn the model's editions and capabilities."""
        ...

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None: ...

    async def predict(
        self, request: model_pb.PredictRequest
    ) -> Reply[model_pb.PredictResponse]: ...

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        """Garbage-collect per-episode state; best-effort."""
        ...

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        """Release the route's adapter; bounded by ``timeout`` seconds."""
        ...

    async def aclose(self) -> None:
        """Release local resources. Idempotent; a shared model is closed by its owner."""
        ...
