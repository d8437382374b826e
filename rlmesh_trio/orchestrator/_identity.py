"""What a route runs against, as a plan identity can hold it: the env and the model, named.

A ledger's plan records these names so that a resume against another env
(Acrobot instead of CartPole) or another policy is refused instead of mixing
two evaluations. In-process endpoints are named here, before the run: a
gymnasium env or env id by its id, a factory or policy by its qualified name
(a ``functools.partial`` with its arguments), any other object by its class.
An endpoint behind an address is named ``address`` only (a resumed run may
find its servers on new ports); its env is checked by its contract when the
route connects (see :func:`contract_identity`).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from ..spaces._bytes import spec_bytes

__all__ = ["ADDRESS", "contract_identity", "env_identity", "model_identity"]

#: The name of an endpoint given as an address (its contract is checked on connect).
ADDRESS = "address"


def _qualified(value: Any) -> str:
    if isinstance(value, functools.partial):
        args = [repr(a) for a in value.args]
        args += [f"{k}={v!r}" for k, v in sorted(value.keywords.items())]
        return f"{_qualified(value.func)}({', '.join(args)})"
    target = value if hasattr(value, "__qualname__") else type(value)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{target.__qualname__}"


def env_identity(value: Any) -> str:
    """``CartPole-v1`` (an env, lanes of it, or an env id factory), a factory's qualified name,
    a :class:`~rlmesh_trio.RuntimeEnv`'s class, or ``address``."""
    if isinstance(value, str):
        return ADDRESS
    if isinstance(value, list | tuple) and value:
        return env_identity(value[0])  # lanes of one env: the lane count is not the work
    spec = getattr(value, "spec", None)
    if spec is not None and isinstance(getattr(spec, "id", None), str):
        return str(spec.id)
    label = getattr(value, "label", None)
    if isinstance(label, str) and not isinstance(value, type):
        return label
    return _qualified(value)


def model_identity(value: Any) -> str:
    """A policy's qualified name (function, or the class of an object), or ``address``."""
    if isinstance(value, str):
        return ADDRESS
    return _qualified(value)


def contract_identity(contract: Any) -> dict[str, str]:
    """The env id and a digest of the spaces of an ``EnvContract`` (what a route drives)."""
    spec = contract.spec
    digest = hashlib.sha256()
    for space in (spec.action_space, spec.observation_space):
        digest.update(spec_bytes(space) if space is not None else b"")
        digest.update(b"|")
    return {"env_id": str(spec.id), "spaces": digest.hexdigest()[:16]}
