"""Importing rlmesh_trio is cheap: each part is imported when first used (issue 34 item 8).

``import rlmesh_trio`` loads the errors and the version, nothing else of weight;
the package's other names are read through PEP 562 ``__getattr__``
(``rlmesh_trio._lazy``). A script's first ``rt.run`` loads the orchestrator, the
runtime and the wire clients, and still no server, env or model host, extra or
rich; ``rlmesh-trio --help`` loads click and the option definitions only. Each
check runs a fresh interpreter and reads ``sys.modules``: no wall-clock bound
(benchmarks/import_time.py measures the time).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Packages whose ``__init__`` exports names lazily (``if TYPE_CHECKING: ... else: lazy_exports``).
LAZY_PACKAGES = [
    "rlmesh_trio",
    "rlmesh_trio.hooks",
    "rlmesh_trio._wire",
]

SERVERS = [
    "rlmesh_trio.transport.server",
    "rlmesh_trio.transport.server._env_server",
    "rlmesh_trio.transport.server._model_server",
    "rlmesh_trio.transport.server._base",
    "rlmesh_trio.transport.server._call",
    "rlmesh_trio.transport.server._conn",
    "rlmesh_trio.transport.server._net",
    "rlmesh_trio.transport.server._thread",
    "rlmesh_trio.transport.server._health_service",
    "rlmesh_trio._wire._h2server",
]
#: Never loaded by a plain run: the servers, what sits above the orchestrator, the hosts
#: behind in-process endpoints, the optional extras, and rich (progress bars and tables).
NOT_FOR_A_RUN = [
    *SERVERS,
    "rlmesh_trio.distributed",
    "rlmesh_trio.results",
    "rlmesh_trio.dashboard",
    "rlmesh_trio.cli",
    "rlmesh_trio.testing",
    "rlmesh_trio._envhost",
    "rlmesh_trio._modelhost",
    "rlmesh_trio.inprocess._local_env",
    "rlmesh_trio.inprocess._local_model",
    "ray",
    "scipy",
    "plotly",
    "av",
    "pygame",
    "torch",
    "jax",
    "stable_baselines3",
    "rich",
    "grpclib",
    "hypercorn",
    "starlette",
]
#: What the run itself needs, left for a name that needs it.
RUNTIME = [
    "trio",
    "numpy",
    "gymnasium",
    "attrs",
    "h2",
    "betterproto2",
    "rlmesh_trio._proto",
    "rlmesh_trio._protocol",
    "rlmesh_trio.orchestrator._run",
    "rlmesh_trio.runtime",
    "rlmesh_trio.spaces",
    "rlmesh_trio.report",
    "rlmesh_trio._wire._h2core",
    "rlmesh_trio.transport.client._remote_env",
]


CLI_NEEDS = ("rlmesh_trio.cli", "attrs")


def loaded_after(code: str, *argv: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after ``code`` (printed to stderr at exit)."""
    script = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('MODULES=' + json.dumps(sorted(sys.modules)), "
        "file=sys.stderr))\n"
        f"sys.argv = ['rlmesh-trio', *sys.argv[1:]]\n{code}\n"
    )
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    result = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(paths)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    line = [x for x in result.stderr.splitlines() if x.startswith("MODULES=")][-1]
    return set(json.loads(line.removeprefix("MODULES=")))


def present(modules: set[str], names: list[str]) -> list[str]:
    """Which of ``names`` (a module, or any module under it) are in ``modules``."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize(
    "module", [m for m in NOT_FOR_A_RUN + RUNTIME if m.startswith("rlmesh_trio")]
)
def test_every_listed_module_exists(module: str) -> None:
    # A module renamed away would make the "not loaded" checks pass without checking anything.
    assert importlib.util.find_spec(module) is not None, f"{module} no longer exists"


def test_importing_the_package_loads_only_its_errors() -> None:
    modules = loaded_after("import rlmesh_trio")
    assert not present(modules, NOT_FOR_A_RUN + RUNTIME)
    ours = sorted(m for m in modules if m.startswith("rlmesh_trio"))
    assert ours == [
        "rlmesh_trio",
        "rlmesh_trio._errors",
        "rlmesh_trio._extras",
        "rlmesh_trio._lazy",
        "rlmesh_trio._version",
    ]


def test_importing_the_package_has_no_side_effects() -> None:
    code = (
        "import signal, threading\n"
        "before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}\n"
        "import rlmesh_trio as rt\n"
        "rt.run, rt.shard, rt.hooks.RichProgress, rt.EnvServer, rt.results.write_html\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "assert before == {s: signal.getsignal(s) for s in before}, 'a signal handler changed'\n"
    )
    modules = loaded_after(code)
    assert "asyncio" not in modules  # so no event-loop policy was set either


def test_a_run_loads_no_server_host_extra_or_rich() -> None:
    modules = loaded_after(
        "import rlmesh_trio as rt\n"
        "rt.run, rt.run_routes, rt.shard, rt.Route, rt.RANDOM, rt.RemoteEnv, rt.RemoteModel\n"
        "routes = rt.shard(envs=['127.0.0.1:1'], model='127.0.0.1:2', seeds=range(2))\n"
    )
    assert not present(modules, NOT_FOR_A_RUN)
    assert "rlmesh_trio.orchestrator._run" in modules  # the check above saw a real run's imports


@pytest.mark.parametrize("argv", [("--help",), ("run", "--help"), ("serve-env", "--help")])
def test_the_cli_help_loads_no_runtime(argv: tuple[str, ...]) -> None:
    modules = loaded_after("from rlmesh_trio.cli import main\nmain()", *argv)
    # the CLI itself, and attrs (its option values), are all --help may load
    assert not present(modules, [m for m in NOT_FOR_A_RUN + RUNTIME if m not in CLI_NEEDS])
    assert "rlmesh_trio.cli._run_cmd" in modules


def _type_checking_imports(package: str) -> dict[str, tuple[str, str | None]]:
    """Exported name -> (absolute module, its name there; None: the module itself), read from
    the package's ``if TYPE_CHECKING:`` block."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    names: dict[str, tuple[str, str | None]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        for alias in node.names:
            exported = alias.asname or alias.name
            if node.module is None:  # from . import hooks
                names[exported] = (f"{base}.{alias.name}", None)
            else:
                names[exported] = (base, alias.name)
    return names


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_lazy_names_are_the_type_checked_ones(package: str) -> None:
    """What type checkers read under TYPE_CHECKING is what ``__getattr__`` gives, name for
    name, and together with the eager imports it is the whole of ``__all__``."""
    module = importlib.import_module(package)
    typed = _type_checking_imports(package)
    eager = {n for n in vars(module) if not n.startswith("__")} - set(typed)
    assert set(module.__all__) <= set(typed) | eager | {"__version__"}
    assert set(typed) <= set(module.__all__), "a lazy name missing from __all__"
    assert set(module.__all__) <= set(dir(module))
    for name, (source, attr) in typed.items():
        target = importlib.import_module(source)
        expected = target if attr is None else getattr(target, attr)
        assert getattr(module, name) is expected, f"{package}.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018
