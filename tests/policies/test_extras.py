"""Without an extra, its policy says how to install it; importing us loads no framework."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CALLS = {
    "torch": "TorchPolicy(lambda x: x)",
    "jax": "JaxPolicy(lambda p, x: x, params=None)",
    "sb3": "SB3Policy('model.zip', algorithm='PPO')",
}

# Run in a subprocess of our own: an import blocker on ITS sys.meta_path makes the
# frameworks look absent there, without touching this process or the installed packages.
# (Importing rlmesh_trio under the blocker also shows it imports none of them.)
_BLOCKED = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"torch", "jax", "jaxlib", "stable_baselines3"}:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    import rlmesh_trio as rt

    messages = {}
    for extra, call in json.loads(sys.argv[1]).items():
        try:
            eval("rt." + call)
        except rt.MissingExtra as exc:
            messages[extra] = [str(exc), isinstance(exc, ImportError)]
    print(json.dumps(messages))
    """
)


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def messages() -> dict[str, list]:
    return json.loads(_run(_BLOCKED, json.dumps(CALLS)))


@pytest.mark.parametrize("extra", sorted(CALLS))
def test_without_the_extra_the_error_says_how_to_install_it(
    messages: dict[str, list], extra: str
) -> None:
    message, is_import_error = messages[extra]
    assert f"pip install 'rlmesh-trio[{extra}]'" in message
    assert message.startswith(CALLS[extra].split("(")[0])
    assert is_import_error


def test_importing_rlmesh_trio_imports_no_framework() -> None:
    loaded = _run(
        "import sys, rlmesh_trio; "
        "print(sorted(m for m in ('torch', 'jax', 'stable_baselines3') if m in sys.modules))"
    )
    assert loaded == "[]"
