"""Without an extra, its policy says how to install it; importing us loads no framework."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Run in a subprocess of our own: an import blocker on ITS sys.meta_path makes the
# framework look absent there, without touching this process or the installed package.
_BLOCKED = textwrap.dedent(
    """
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"torch", "jax", "jaxlib", "stable_baselines3"}:
                raise ImportError(f"No module named {name!r} (blocked)")
            return None

    sys.meta_path.insert(0, Blocker())
    import rlmesh_trio as rt
    try:
        rt.%s
    except rt.MissingExtra as exc:
        assert isinstance(exc, ImportError)
        print(exc)
    else:
        raise SystemExit("no MissingExtra")
    """
)


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("call", "extra"),
    [
        ("TorchPolicy(lambda x: x)", "torch"),
        ("JaxPolicy(lambda p, x: x, params=None)", "jax"),
        ("SB3Policy('model.zip', algorithm='PPO')", "sb3"),
    ],
)
def test_without_the_extra_the_error_says_how_to_install_it(call: str, extra: str) -> None:
    message = _run(_BLOCKED % call)
    assert f"pip install 'rlmesh-trio[{extra}]'" in message
    assert message.startswith(call.split("(")[0])


def test_importing_rlmesh_trio_imports_no_framework() -> None:
    loaded = _run(
        "import sys, rlmesh_trio; "
        "print(sorted(m for m in ('torch', 'jax', 'stable_baselines3') if m in sys.modules))"
    )
    assert loaded == "[]"
