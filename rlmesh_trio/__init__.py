"""rlmesh-trio: evaluate RL models against many environments in parallel, on Trio.

The public API is re-exported here; everything else lives in private modules::

    import rlmesh_trio as rt

    routes = rt.shard(envs=["127.0.0.1:5555", "127.0.0.1:5556"], model=policy, seeds=range(100))
    report = rt.run(routes)                  # or: await rt.run_routes(routes) inside Trio
"""

from typing import TYPE_CHECKING

from ._errors import (
    ConnectError,
    EnvRpcError,
    HandshakeError,
    HookError,
    InvalidSpec,
    ModelRouteMismatch,
    ModelRpcError,
    OperationTimeout,
    PolicyError,
    ProtocolError,
    RlmeshTrioError,
    RouteCancelled,
    RunFileError,
    ShardLost,
    WrongEventLoop,
)
from ._extras import MissingExtra
from ._version import __version__

# Everything else is imported when first read (PEP 562, see _lazy): `import rlmesh_trio`
# (and so every `rlmesh-trio` command, --help included) loads no runtime, wire, server or
# extra until a name needs it. Type checkers and the docs read the imports below.
if TYPE_CHECKING:
    from . import distributed, hooks, report, results, spaces
    from ._modelhost import JaxPolicy, SB3Policy, TorchPolicy, policy
    from ._wire import ServerLimits
    from .distributed import run_distributed
    from .inprocess import RANDOM, LocalEnv, LocalModel
    from .orchestrator import (
        LedgerError,
        LedgerExists,
        Orchestrator,
        PlanMismatch,
        Route,
        RouteOutcome,
        RunFailed,
        RunInterrupted,
        RunMeta,
        RunReport,
        load_ledger,
        run,
        run_routes,
        shard,
    )
    from .orchestrator._options import RunOptions
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
else:
    from ._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._modelhost": ("JaxPolicy", "SB3Policy", "TorchPolicy", "policy"),
            ".distributed": ("run_distributed",),
            ".inprocess": ("RANDOM", "LocalEnv", "LocalModel"),
            ".orchestrator._options": ("RunOptions",),
            ".orchestrator": (
                "LedgerError",
                "LedgerExists",
                "Orchestrator",
                "PlanMismatch",
                "Route",
                "RouteOutcome",
                "RunFailed",
                "RunInterrupted",
                "RunMeta",
                "RunReport",
                "load_ledger",
                "run",
                "run_routes",
                "shard",
            ),
            ".runtime": (
                "EndpointInfo",
                "EpisodeResult",
                "HookChain",
                "Limits",
                "Reply",
                "RouteDriver",
                "RouteReport",
                "RouteSpec",
                "RuntimeEnv",
                "RuntimeHooks",
                "RuntimeModel",
                "TelemetryRow",
            ),
            ".transport": (
                "EnvServer",
                "ModelServer",
                "RemoteEnv",
                "RemoteModel",
                "check_health",
                "serve_env",
                "serve_model",
            ),
            "._wire": ("ServerLimits",),
        },
        submodules=("distributed", "hooks", "report", "results", "spaces"),
    )

__all__ = [
    "RANDOM",
    "ConnectError",
    "EndpointInfo",
    "EnvRpcError",
    "EnvServer",
    "EpisodeResult",
    "HandshakeError",
    "HookChain",
    "HookError",
    "InvalidSpec",
    "JaxPolicy",
    "LedgerError",
    "LedgerExists",
    "Limits",
    "LocalEnv",
    "LocalModel",
    "MissingExtra",
    "ModelRouteMismatch",
    "ModelRpcError",
    "ModelServer",
    "OperationTimeout",
    "Orchestrator",
    "PlanMismatch",
    "PolicyError",
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
    "RunFileError",
    "RunInterrupted",
    "RunMeta",
    "RunOptions",
    "RunReport",
    "RuntimeEnv",
    "RuntimeHooks",
    "RuntimeModel",
    "SB3Policy",
    "ServerLimits",
    "ShardLost",
    "TelemetryRow",
    "TorchPolicy",
    "WrongEventLoop",
    "__version__",
    "check_health",
    "distributed",
    "hooks",
    "load_ledger",
    "policy",
    "report",
    "results",
    "run",
    "run_distributed",
    "run_routes",
    "serve_env",
    "serve_model",
    "shard",
    "spaces",
]
