"""rlmesh-trio: evaluate RL models against many environments in parallel, on Trio.

The public API is re-exported here; everything else lives in private modules.
"""

from ._errors import (
    ConnectError,
    EnvRpcError,
    HandshakeError,
    HookError,
    InvalidSpec,
    ModelRouteMismatch,
    ModelRpcError,
    OperationTimeout,
    ProtocolError,
    RlmeshTrioError,
    RouteCancelled,
    RunFailed,
)

__version__ = "0.1.0"

__all__ = [
    "ConnectError",
    "EnvRpcError",
    "HandshakeError",
    "HookError",
    "InvalidSpec",
    "ModelRouteMismatch",
    "ModelRpcError",
    "OperationTimeout",
    "ProtocolError",
    "RlmeshTrioError",
    "RouteCancelled",
    "RunFailed",
    "__version__",
]
