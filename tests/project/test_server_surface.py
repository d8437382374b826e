"""The servers' public face: exactly the documented methods, properties and attributes.

Issue 35 item 5: the hooks the serving machinery uses (the close bound, the
blocking serve, the thread refusal, the stop hand-off, the routes) are private;
what users call is rlmesh 0.1.0's lifecycle (``start``/``wait``/``shutdown``,
``with``), the blocking ``serve``, Trio's ``run`` and the read-only facts
(docs/guide/python-api.md, docs/guide/servers.md).
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium
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


def _built(cls: type) -> Any:
    """A real server of ``cls``, built and never started (nothing listens)."""
    if cls is rt.EnvServer:
        return rt.EnvServer(gymnasium.make("CartPole-v1"), "127.0.0.1:0")
    return rt.ModelServer(lambda observation: 0, "127.0.0.1:0")


@pytest.mark.parametrize("cls", [rt.EnvServer, rt.ModelServer], ids=lambda c: c.__name__)
def test_server_attributes_are_exactly_the_allowlist(cls: type) -> None:
    """Every public attribute a built server has (data too: the class's constants and what
    its constructor stored), not only methods: the serving machinery's settings and hooks
    (the gRPC service, the message module, the host, the limits...) are private."""
    server = _built(cls)
    try:
        public = {name for name in dir(server) if not name.startswith("_")}
    finally:
        server.shutdown()
    assert public == ALLOWED[cls], (
        f"{cls.__name__} public attributes differ from the allowlist: "
        f"extra {sorted(public - ALLOWED[cls])}, missing {sorted(ALLOWED[cls] - public)}"
    )
