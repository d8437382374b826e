"""rlmesh-trio: evaluate RL models against many environments in parallel, on Trio.

The public API is re-exported here; everything else lives in private modules. Each
public name has one home: these names here, the others in one public subpackage
(``rt.hooks``, ``rt.report``, ``rt.results``, ``rt.spaces``, ``rt.distributed``,
``rlmesh_trio.testing``...)::

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
    from ._endpoints import EndpointInfo, Reply, RuntimeEnv, RuntimeModel
    from ._modelhost import JaxPolicy, SB3Policy, TorchPolicy, policy
    from ._wire import ServerLimits
    from .distributed._api import run_distributed
    from .inprocess._local_env import LocalEnv
    from .inprocess._local_model import LocalModel
    from .inprocess._random_model import RANDOM
    from .orchestrator._durable import load_ledger
    from .orchestrator._ledger import LedgerError, LedgerExists
    from .orchestrator._options import RunOptions
    from .orchestrator._plan import PlanMismatch
    from .orchestrator._route import Route, shard
    from .orchestrator._run import Orchestrator, RunInterrupted, run, run_routes
    from .report._outcome import RouteOutcome, RunMeta
    from .report._report import RunFailed, RunReport
    from .runtime._driver import RouteDriver
    from .runtime._hooks import HookChain, RuntimeHooks
    from .runtime._results import EpisodeResult, RouteReport, TelemetryRow
    from .runtime._spec import Limits, RouteSpec
    from .transport.client._health import check_health
    from .transport.client._remote_env import RemoteEnv
    from .transport.client._remote_model import RemoteModel
    from .transport.server._env_server import EnvServer, serve_env
    from .transport.server._model_server import ModelServer, serve_model
else:
    from ._lazy import lazy_exports

    # Each name is read from the module that defines it: rlmesh_trio is its one public
    # home (the subpackages' old paths warn, see _deprecated).
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._endpoints": ("EndpointInfo", "Reply", "RuntimeEnv", "RuntimeModel"),
            "._modelhost": ("JaxPolicy", "SB3Policy", "TorchPolicy", "policy"),
            "._wire": ("ServerLimits",),
            ".distributed._api": ("run_distributed",),
            ".inprocess._local_env": ("LocalEnv",),
            ".inprocess._local_model": ("LocalModel",),
            ".inprocess._random_model": ("RANDOM",),
            ".orchestrator._durable": ("load_ledger",),
            ".orchestrator._ledger": ("LedgerError", "LedgerExists"),
            ".orchestrator._options": ("RunOptions",),
            ".orchestrator._plan": ("PlanMismatch",),
            ".orchestrator._route": ("Route", "shard"),
            ".orchestrator._run": ("Orchestrator", "RunInterrupted", "run", "run_routes"),
            ".report._outcome": ("RouteOutcome", "RunMeta"),
            ".report._report": ("RunFailed", "RunReport"),
            ".runtime._driver": ("RouteDriver",),
            ".runtime._hooks": ("HookChain", "RuntimeHooks"),
            ".runtime._results": ("EpisodeResult", "RouteReport", "TelemetryRow"),
            ".runtime._spec": ("Limits", "RouteSpec"),
            ".transport.client._health": ("check_health",),
            ".transport.client._remote_env": ("RemoteEnv",),
            ".transport.client._remote_model": ("RemoteModel",),
            ".transport.server._env_server": ("EnvServer", "serve_env"),
            ".transport.server._model_server": ("ModelServer", "serve_model"),
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
