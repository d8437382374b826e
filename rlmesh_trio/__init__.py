"""rlmesh-trio: evaluate RL models against many environments in parallel, on Trio.

The public API is re-exported here; everything else lives in private modules::

    import rlmesh_trio as rt

    routes = rt.shard(envs=["127.0.0.1:5555", "127.0.0.1:5556"], model=policy, seeds=range(100))
    report = rt.run(routes)                  # or: await rt.run_routes(routes) inside Trio
"""

from . import hooks, results, spaces
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
from ._local_env import LocalEnv
from ._local_model import LocalModel
from ._modelhost import policy
from ._version import __version__
from .orchestrator import (
    Orchestrator,
    Route,
    RouteOutcome,
    RunInterrupted,
    RunReport,
    run,
    run_routes,
    shard,
)
from .runtime import (
    EndpointInfo,
    EpisodeResult,
    HookChain,
    Limits,
    Reply,
    RouteDriver,
    RouteReport,
    RouteSpec,
    RuntimeEnv,
    RuntimeHooks,
    RuntimeModel,
    TelemetryRow,
)
from .transport import (
    EnvServer,
    ModelServer,
    RemoteEnv,
    RemoteModel,
    check_health,
    serve_env,
    serve_model,
)

__all__ = [
    "ConnectError",
    "EndpointInfo",
    "EnvRpcError",
    "EnvServer",
    "EpisodeResult",
    "HandshakeError",
    "HookChain",
    "HookError",
    "InvalidSpec",
    "Limits",
    "LocalEnv",
    "LocalModel",
    "ModelRouteMismatch",
    "ModelRpcError",
    "ModelServer",
    "OperationTimeout",
    "Orchestrator",
    "ProtocolError",
    "RemoteEnv",
    "RemoteModel",
    "Reply",
    "RlmeshTrioError",
    "Route",
    "RouteCancelled",
    "RouteDriver",
    "RouteOutcome",
    "RouteReport",
    "RouteSpec",
    "RunFailed",
    "RunInterrupted",
    "RunReport",
    "RuntimeEnv",
    "RuntimeHooks",
    "RuntimeModel",
    "TelemetryRow",
    "__version__",
    "check_health",
    "hooks",
    "policy",
    "results",
    "run",
    "run_routes",
    "serve_env",
    "serve_model",
    "shard",
    "spaces",
]
