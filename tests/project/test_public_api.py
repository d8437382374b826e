"""The curated public API: what ``import rlmesh_trio as rt`` promises."""

from __future__ import annotations

import importlib
import inspect

import pytest

import rlmesh_trio as rt

PACKAGES = [
    "rlmesh_trio",
    "rlmesh_trio.spaces",
    "rlmesh_trio.runtime",
    "rlmesh_trio.orchestrator",
    "rlmesh_trio.transport",
    "rlmesh_trio.hooks",
    "rlmesh_trio.testing",
    "rlmesh_trio.results",
    "rlmesh_trio.report",
]

# Names other work (examples, the CLI, outside checks) relies on.
CONTRACT = {
    "rlmesh_trio": [
        "Route",
        "run_routes",
        "run",
        "shard",
        "RunReport",
        "RouteOutcome",
        "RunFailed",
        "RunInterrupted",
        "Limits",
        "RouteSpec",
        "RouteDriver",
        "RuntimeEnv",
        "RuntimeModel",
        "RuntimeHooks",
        "HookChain",
        "EpisodeResult",
        "RouteReport",
        "TelemetryRow",
        "EnvServer",
        "ModelServer",
        "RemoteEnv",
        "RemoteModel",
        "serve_env",
        "serve_model",
        "RlmeshTrioError",
        "InvalidSpec",
        "OperationTimeout",
        "RouteCancelled",
        "EnvRpcError",
        "ModelRpcError",
        "ModelRouteMismatch",
        "ProtocolError",
        "HookError",
        "RANDOM",
        "hooks",
        "spaces",
        "TorchPolicy",
        "JaxPolicy",
        "SB3Policy",
        "MissingExtra",
        "PolicyError",
    ],
    "rlmesh_trio.spaces": [
        "from_gymnasium",
        "to_gymnasium",
        "encode_batch",
        "decode_batch",
        "encode",
        "decode",
        "encode_stacked",
        "decode_stacked",
        "meta_from_python",
        "meta_to_python",
    ],
    "rlmesh_trio.hooks": ["RichProgress", "LoggingHooks", "ValueTransform", "Dashboard", "events"],
    "rlmesh_trio.testing": ["ScriptedEnv", "ScriptedModel", "RecordingHooks"],
}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_names_exist_and_are_public(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported)), "duplicate names in __all__"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"
        assert not attr.startswith("_") or attr == "__version__", f"{name} exports {attr!r}"


@pytest.mark.parametrize(("name", "names"), sorted(CONTRACT.items()))
def test_contract_names_are_exported(name: str, names: list[str]) -> None:
    module = importlib.import_module(name)
    missing = sorted(set(names) - set(module.__all__))
    assert not missing, f"{name} does not export {missing}"


def test_public_callables_are_documented() -> None:
    undocumented = []
    for attr in rt.__all__:
        obj = getattr(rt, attr)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not inspect.getdoc(obj):
            undocumented.append(attr)
    assert not undocumented, f"public API without docstrings: {undocumented}"


def test_errors_share_one_base_and_do_not_shadow_builtins() -> None:
    for attr in rt.__all__:
        obj = getattr(rt, attr)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, rt.RlmeshTrioError), attr
    assert "RuntimeError" not in rt.__all__


def test_version() -> None:
    from importlib.metadata import version

    assert rt.__version__ == version("rlmesh-trio")
