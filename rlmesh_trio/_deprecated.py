"""Old import paths that keep working for one release, each read with a ``DeprecationWarning``.

Every public name has one home (``rlmesh_trio`` for the names of ``rt.__all__``, else
one subpackage). A name that moved to its home stays readable at its old path until
the release named in :data:`REMOVED_IN`; the warning names the new home, so the fix is
one edited import. :data:`MOVED` is the whole table (docs/deprecated.md lists it
for people); an old package serves its part of it with::

    __getattr__, __dir__ = moved_names(__name__, fallback=__getattr__, listed=__dir__)
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MOVED", "REMOVED_IN", "moved_names"]

#: The release that drops the old paths.
REMOVED_IN = "0.3"

_RT = "rlmesh_trio"
_EVENTS = "rlmesh_trio.hooks.events"
_EVENT_CLASSES = (
    "ActionReceivedEvent",
    "EpisodeCompletedEvent",
    "EpisodeStartedEvent",
    "LogEvent",
    "ObservationEmittedEvent",
    "RouteContext",
    "SessionEndedEvent",
    "SessionFailedEvent",
    "SessionStartedEvent",
    "StepCompletedEvent",
    "TelemetrySummaryEvent",
    "TelemetryWindowEvent",
)
#: Names of the wire core, private since it became ``rlmesh_trio._wire``.
_WIRE_NAMES = (
    "HAND_DECODERS",
    "HAND_ENCODERS",
    "MAX_MESSAGE_BYTES",
    "ClientCore",
    "ConnectionTerminated",
    "Event",
    "FramingError",
    "GrpcError",
    "GrpcStatus",
    "JoinDemux",
    "MessageReader",
    "MessageReceived",
    "MessageRefused",
    "NotHttp2",
    "PingAcknowledged",
    "ProtocolFailure",
    "RequestEnded",
    "RequestReceived",
    "ResponseHeaders",
    "ServerCore",
    "StreamEnded",
    "StreamReset",
    "Undecodable",
    "Waiter",
    "check_size",
    "encode_env_reply",
    "frame",
    "parse_message",
    "request_headers",
)
_STATS_AND_BUNDLES = (
    "SCHEMA",
    "Difference",
    "MediaRef",
    "Summary",
    "bundle_document",
    "compare_rewards",
    "resample_batch",
    "statistics_block",
    "summarize",
    "write_bundle",
)

#: Old package -> moved name -> the module that is now its one home (a private module:
#: internal now, with no public replacement).
MOVED: Mapping[str, Mapping[str, str]] = {
    "rlmesh_trio.dashboard": {"Dashboard": "rlmesh_trio.hooks"},
    "rlmesh_trio.distributed": {"run_distributed": _RT, "RunOptions": _RT},
    "rlmesh_trio.hooks": dict.fromkeys(("HookChain", "RuntimeHooks"), _RT),
    "rlmesh_trio.inprocess": dict.fromkeys(("RANDOM", "LocalEnv", "LocalModel"), _RT),
    "rlmesh_trio.orchestrator": dict.fromkeys(
        (
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
        _RT,
    ),
    "rlmesh_trio.report": {
        **dict.fromkeys(("RouteOutcome", "RunFailed", "RunMeta", "RunReport"), _RT),
        **dict.fromkeys(_STATS_AND_BUNDLES, "rlmesh_trio.results"),
    },
    "rlmesh_trio.results": dict.fromkeys(
        ("RecordedError", "report_from_dict"), "rlmesh_trio.report"
    ),
    "rlmesh_trio.runtime": {
        **dict.fromkeys(
            (
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
            _RT,
        ),
        "events": "rlmesh_trio.hooks",
        **dict.fromkeys(_EVENT_CLASSES, _EVENTS),
    },
    "rlmesh_trio.runtime.events": dict.fromkeys(_EVENT_CLASSES, _EVENTS),
    "rlmesh_trio.transport": dict.fromkeys(
        (
            "EnvServer",
            "ModelServer",
            "RemoteEnv",
            "RemoteModel",
            "check_health",
            "serve_env",
            "serve_model",
        ),
        _RT,
    ),
    "rlmesh_trio.wire": {
        "ServerLimits": _RT,
        **dict.fromkeys(_WIRE_NAMES, "rlmesh_trio._wire"),
    },
}


def moved_names(
    package: str,
    fallback: Callable[[str], Any] | None = None,
    listed: Callable[[], list[str]] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__``/``__dir__`` that serves the package's moved names with a warning.

    Args:
        package: the old module's ``__name__``; its moved names are ``MOVED[package]``.
        fallback: the module's own ``__getattr__`` (lazy exports) for every other name.
        listed: the module's own ``__dir__``; the moved names are not listed.

    The value is not cached on the old module, so every read warns (``warnings``
    shows each call site once by default).

    Raises:
        KeyError: ``package`` has no entry in :data:`MOVED` (at import of the package).
    """
    homes = MOVED[package]

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if home.rsplit(".", 1)[-1].startswith("_"):
            advice = "it is internal now, with no public replacement"
        else:
            advice = f"import it from {home} ({home}.{name})"
        warnings.warn(
            f"{package}.{name} is deprecated and goes in {REMOVED_IN}; {advice}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        own = listed() if listed is not None else sorted(vars(sys.modules[package]))
        return sorted(set(own))

    return __getattr__, __dir__
