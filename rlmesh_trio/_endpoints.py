"""The seams between a route driver and its two endpoints: the contracts, in one place.

``RuntimeEnv`` and ``RuntimeModel`` are what the driver talks to. What some
endpoints can do beyond them is a named capability contract here too
(``EncodesObservations``, ``StepsOnLeaves``, ``PredictsLeaves``,
``GroupsPredicts``, ``SubmitsPredicts``), checked with ``isinstance``; the
lane-block contracts (``LaneBlockEnv``, ``LaneBlockModel``) are in ``_blocks.py``
beside this module, with their array value objects. The gRPC
clients (``rlmesh_trio.transport``), the in-process adapters and the fakes of
``rlmesh_trio.testing`` all implement them. Requests and responses are the
wire-v1 protobuf messages themselves, so a remote peer's payloads pass
through the driver without being decoded.

Cancellation: every method may be cancelled by the caller's Trio cancel
scope. After a cancelled ``reset``/``step``/``predict`` the endpoint is only
good for ``close``/``release_adapter`` (which the driver calls shielded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from ._protocol import core_pb, env_pb, model_pb, spaces_pb

__all__ = [
    "EncodesObservations",
    "EndpointInfo",
    "GroupsPredicts",
    "PredictsLeaves",
    "Reply",
    "RuntimeEnv",
    "RuntimeModel",
    "StepsOnLeaves",
    "SubmitsPredicts",
]

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


# -- capabilities: what some endpoints do beyond the two contracts above ---------------------
#
# Each is a named contract the runtime and the orchestrator check with ``isinstance``
# once per route (never per step), so an endpoint states what it can do by what it
# implements, not by attributes a caller happens to probe for.


@runtime_checkable
class EncodesObservations(Protocol):
    """An env endpoint that encodes its observations in this process, with the codec,
    for the spec object it names (``LocalEnv``): its framing is right by construction,
    so a route checking replies against that very spec skips the per-step check."""

    @property
    def encoded_observation_space(self) -> spaces_pb.SpaceSpec | None:
        """The spec object every observation is encoded for (None before ``connect``)."""
        ...


@runtime_checkable
class StepsOnLeaves(Protocol):
    """An in-process env endpoint that steps on an action frame's leaves, with no
    request or response message (``LocalEnv`` over one env)."""

    @property
    def steps_on_leaves(self) -> bool:
        """Whether :meth:`step_leaves` can step this env now (connected, one env)."""
        ...

    async def step_leaves(
        self, action: list[bytes], timeout_ms: int
    ) -> tuple[Any, dict[str, float]] | None:
        """The step's answer as ``wire.StepParts`` and its endpoint telemetry; None when
        it cannot run so right now (send a ``StepRequest`` instead).

        Raises:
            EnvRpcError: what ``step`` raises for the same action.
        """
        ...


@runtime_checkable
class PredictsLeaves(Protocol):
    """An in-process model endpoint that answers a route's one-row predicts on frame
    leaves, with no request or response message (``LocalModel``)."""

    def takes_leaves(self, env_id: str) -> bool:
        """Whether the route ``env_id``'s predicts may go through :meth:`predict_leaves`."""
        ...

    async def predict_leaves(self, env_id: str, leaves: list[bytes]) -> list[bytes] | None:
        """The action's frame leaves; None when it cannot run so right now (send a
        ``PredictRequest`` instead).

        Raises:
            ModelRpcError: what ``predict`` raises for the same observation.
        """
        ...


@runtime_checkable
class GroupsPredicts(Protocol):
    """A model endpoint that answers several routes' predicts in one call
    (``RemoteModel`` in one GroupedPredict round trip, ``LocalModel`` in one fused
    batched call)."""

    async def grouped_predict(
        self, requests: Sequence[model_pb.PredictRequest]
    ) -> Sequence[Reply[model_pb.PredictResponse] | BaseException]:
        """One entry per request, in order: its reply, or the error for it alone.

        Raises:
            ModelRpcError: the whole call failed (transport, a top-level error).
        """
        ...


@runtime_checkable
class SubmitsPredicts(Protocol):
    """A model client that can send predicts without waiting for their answers
    (``RemoteModel``): the answers are handed to a callback on the connection's reader."""

    def submit_predicts(
        self,
        requests: Sequence[model_pb.PredictRequest],
        on_done: Callable[[list[Reply[model_pb.PredictResponse] | Exception]], None],
    ) -> bool:
        """Send now; ``False`` (nothing sent) when no stream is open yet."""
        ...
