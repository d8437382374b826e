"""The servers' public face: exactly the documented methods and properties.

Issue 35 item 5: the hooks the serving machinery uses (the close bound, the
blocking serve, the thread refusal, the stop hand-off, the routes) are private;
what users call is rlmesh 0.1.0's lifecycle (``start``/``wait``/``shutdown``,
``with``), the blocking ``serve``, Trio's ``run`` and the read-only facts
(docs/guide/python-api.md, docs/guide/servers.md).
"""

from __future__ import annotations

import inspect

import pytest

import rlmesh_trio as rt

#: Methods and properties every server offers.
COMMON = {"address", "url", "shutdown_reason", "serve", "run", "start", "wait", "shutdown"}
#: Per server: the common face plus its own read-only fact.
ALLOWED = {rt.EnvServer: COMMON | {"contract"}, rt.ModelServer: COMMON | {"inline"}}


def _public_callables(cls: type) -> set[str]:
    """Public methods and properties (plain class constants such as ``kind`` are data)."""
    names = set()
    for name, value in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if inspect.isfunction(value) or isinstance(value, property):
            names.add(name)
    return names


@pytest.mark.parametrize("cls", [rt.EnvServer, rt.ModelServer], ids=lambda c: c.__name__)
def test_server_methods_are_exactly_the_allowlist(cls: type) -> None:
    public = _public_callables(cls)
    assert public == ALLOWED[cls], (
        f"{cls.__name__} public methods differ from the allowlist: "
        f"extra {sorted(public - ALLOWED[cls])}, missing {sorted(ALLOWED[cls] - public)}"
    )


@pytest.mark.parametrize("cls", [rt.EnvServer, rt.ModelServer], ids=lambda c: c.__name__)
def test_server_public_methods_are_documented(cls: type) -> None:
    undocumented = sorted(n for n in ALLOWED[cls] if not inspect.getdoc(getattr(cls, n)))
    assert not undocumented, f"{cls.__name__} public methods without docstrings: {undocumented}"
