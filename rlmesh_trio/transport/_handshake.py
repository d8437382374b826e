"""Client handshakes: what we tell a peer about ourselves, and what we make of its reply.

The handshake decides only protocol compatibility (the generation). Editions
are reconciled by the runtime across env, model and runtime (protocol notes
§2.2), so here we only report the peer's CAN/WANT in the ``EndpointInfo``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import platform
import sys

from .. import _wire as wire
from .._endpoints import EndpointInfo
from .._errors import ConnectError, HandshakeError
from .._protocol import PROTOCOL_GENERATION, WORKFLOW_EDITION, core_pb, env_pb
from .._version import __version__
from .._wire import GrpcError
from .._wire import GrpcStatus as Status

__all__ = [
    "ENV_COMPONENT",
    "MODEL_COMPONENT",
    "endpoint_info",
    "handshake_failure",
    "handshake_request",
    "local_peer_info",
]

ENV_COMPONENT = "rlmesh-env"
MODEL_COMPONENT = "rlmesh-model"

_FRAMEWORKS = ("numpy", "torch", "jax", "jaxlib", "gymnasium")


@functools.cache
def _framework_versions() -> tuple[tuple[str, str], ...]:
    found = []
    for name in _FRAMEWORKS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found.append((name, importlib.metadata.version(name)))
    return tuple(found)


def local_peer_info(component: str) -> core_pb.PeerInfo:
    """Our advisory PeerInfo, shaped like the one 0.1.0 Python peers send (§2.3)."""
    return core_pb.PeerInfo(
        component=component,
        package_version=__version__,
        language="python",
        language_version=platform.python_version(),
        os=sys.platform if sys.platform != "darwin" else "macos",
        os_version=platform.release(),
        arch=platform.machine(),
        framework_versions=dict(_framework_versions()),
        extra={
            "rlmesh.workflow.base": WORKFLOW_EDITION,
            "rlmesh.workflow.edition": WORKFLOW_EDITION,
            "rlmesh_trio.version": __version__,
        },
    )


def handshake_request(component: str) -> core_pb.HandshakeRequest:
    """Our base handshake: wire-v1, CAN ``["2026.06"]``, WANT ``"2026.06"``, no capabilities."""
    return core_pb.HandshakeRequest(
        protocol_generation=PROTOCOL_GENERATION,
        peer_info=local_peer_info(component),
        capabilities={},
        supported_workflow_editions=[WORKFLOW_EDITION],
        preferred_workflow_edition=WORKFLOW_EDITION,
    )


def endpoint_info(
    label: str,
    base: core_pb.HandshakeResponse | None,
    *,
    contract: core_pb.EnvContract | None = None,
    require_contract: bool = False,
) -> EndpointInfo:
    """Check a handshake reply and turn it into an :class:`EndpointInfo`.

    Raises :class:`HandshakeError` naming ``label`` when the peer declared the
    connection incompatible, or (for env peers) sent no usable contract.
    """
    if base is None:
        raise HandshakeError(label, "the handshake reply has no base message")
    if not base.compatible:
        said = base.error_message or "no reason given"
        raise HandshakeError(label, f"the endpoint refused protocol {PROTOCOL_GENERATION}: {said}")
    if require_contract:
        if contract is None:
            raise HandshakeError(label, "the env endpoint sent no env_contract")
        spec = contract.spec
        if spec is None:
            raise HandshakeError(label, "the env contract has no EnvSpec")
        if spec.action_space is None:
            raise HandshakeError(label, "the env contract has no action_space")
        if spec.observation_space is None:
            raise HandshakeError(label, "the env contract has no observation_space")
    return EndpointInfo(
        label=label,
        editions=tuple(base.supported_workflow_editions),
        preferred_edition=base.preferred_workflow_edition or None,
        capabilities=dict(base.capabilities),
        contract=contract,
        peer=base.peer_info,
    )


def parse_env_handshake(label: str, data: bytes) -> EndpointInfo:
    reply = wire.parse_message(env_pb.HandshakeResponse, data)
    return endpoint_info(label, reply.base, contract=reply.env_contract, require_contract=True)


def handshake_failure(label: str, exc: GrpcError, service: str) -> Exception:
    """Map a gRPC status on a handshake to our error kinds."""
    if exc.status is Status.UNIMPLEMENTED:
        return HandshakeError(label, f"the endpoint does not serve {service} (UNIMPLEMENTED)")
    if exc.status is Status.UNKNOWN and exc.message == "Missing content-type header":
        # grpclib servers answer an unknown method without a content-type, which
        # grpclib clients report this way instead of UNIMPLEMENTED.
        return HandshakeError(
            label, f"the endpoint does not serve {service} (UNIMPLEMENTED, no content-type)"
        )
    detail = f"{exc.status.name}: {exc.message}" if exc.message else exc.status.name
    if exc.status in (Status.UNAUTHENTICATED, Status.PERMISSION_DENIED, Status.UNAVAILABLE):
        return ConnectError(label, detail)
    return HandshakeError(label, detail)
