"""Env factories named on the command line, checked to build an env before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["EnvFactory", "is_env_like", "unknown_env_id_message"]


def is_env_like(value: Any) -> bool:
    """An env we can host: an object with ``reset`` and ``step`` (a gymnasium ``Env`` or
    ``VectorEnv``, or one that only quacks like one), or a non-empty list of such (lanes)."""
    if isinstance(value, list | tuple):
        return bool(value) and all(is_env_like(item) for item in value)
    return (
        not isinstance(value, type)
        and callable(getattr(value, "reset", None))
        and callable(getattr(value, "step", None))
    )


class EnvFactory:
    """A ``module:factory`` env target: every env it builds is checked to be an env.

    ``label`` (the spec as typed) is what the run report shows for the route.
    :meth:`build_now` builds one env ahead of the run so a factory that fails
    or returns something else is a usage error before any route starts; that
    env is handed out by the next call instead of building another.
    """

    def __init__(self, factory: Callable[[], Any], spec: str) -> None:
        self.label = spec
        self._factory = factory
        self._ready: list[Any] = []

    def __repr__(self) -> str:
        return f"EnvFactory({self.label!r})"

    def __call__(self) -> Any:
        """An env: the one built ahead by :meth:`build_now`, else a new one.

        Raises:
            click.UsageError: the factory raised, or returned something that is
                not an env ("factory mod:fn returned dict, not a gymnasium Env").
        """
        return self._ready.pop() if self._ready else self._build()

    def build_now(self) -> EnvFactory:
        """Build (and check) the env the first call will return; ``self``, for chaining.

        Raises:
            click.UsageError: as :meth:`__call__`.
        """
        if not self._ready:
            self._ready.append(self._build())
        return self

    def _build(self) -> Any:
        try:
            env = self._factory()
        except Exception as exc:
            raise click.UsageError(
                f"could not build env {self.label!r}: {type(exc).__name__}: {exc}"
            ) from exc
        if not is_env_like(env):
            raise click.UsageError(
                f"factory {self.label} returned {type(env).__name__}, not a gymnasium Env"
            )
        return env


def unknown_env_id_message(spec: str) -> str:
    """Why gymnasium does not make ``spec``, in gymnasium's own words: it says when an id is
    deprecated and which version replaces it, or suggests a spelling."""
    import gymnasium

    hint = "(use a registered id, module:factory or an address host:port)"
    try:
        gymnasium.spec(spec)
    except gymnasium.error.DeprecatedEnv as exc:
        return f"gymnasium env id {spec!r}: {exc}"
    except Exception as exc:  # gymnasium's lookup errors, and its parser's on odd ids
        return f"unknown gymnasium env id {spec!r}: {exc} {hint}"
    return f"unknown gymnasium env id {spec!r} {hint}"
