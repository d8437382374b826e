"""Turning command-line words into envs, policies, seeds and limits, with one-line errors.

Every mistake raises :class:`click.UsageError` whose message is the whole
``error:`` line (exit 2).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import click

from .._errors import InvalidSpec
from ._checks import check_address
from ._envs import EnvFactory, unknown_env_id_message

if TYPE_CHECKING:
    from ..runtime._spec import Limits

__all__ = [
    "EnvIdFactory",
    "build_first_envs",
    "is_address",
    "load_object",
    "load_policy",
    "make_env_factory",
    "parse_limits",
    "parse_seeds",
    "resolve_env",
    "resolve_model",
]

_ADDRESS = re.compile(r"^(tcp://|http://|unix://)|^[\w.\-]*:\d+$|^\[[0-9a-fA-F:]+\]:\d+$|^\d+$")


def is_address(text: str) -> bool:
    """``host:port``, ``:port``, ``tcp://``, ``http://`` or ``unix://``: a network endpoint."""
    return bool(_ADDRESS.match(text.strip()))


def _import_from_current_folder() -> None:
    # The installed ``rlmesh-trio`` script has its own folder as sys.path[0], so a user's
    # ``mypol:act`` next to them would not import; ``python -m`` and uvicorn put the current
    # folder first, and so do we (only for the CLI, and only when it is not there already).
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def load_object(spec: str, what: str) -> Any:
    """Import ``module:attribute`` (attribute may be dotted), the current folder first.

    Raises:
        click.UsageError: ``spec`` is malformed, the module does not import, or
            it has no such attribute.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.UsageError(f"{what} {spec!r} is not of the form module:name")
    _import_from_current_folder()
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.UsageError(f"{what} {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise click.UsageError(f"{what} {spec!r}: {module_name!r} has no {attr!r}") from None
    return obj


def load_policy(spec: str, what: str) -> Any:
    """Import ``module:attribute`` and check it is something we can call as a policy.

    Raises:
        click.UsageError: the import failed, or the object is neither callable
            nor has a callable ``predict`` (named with its type).
    """
    from .._modelhost import as_policy

    obj = load_object(spec, what)
    try:
        as_policy(obj)
    except TypeError:
        raise click.UsageError(
            f"{what} {spec!r} is a {type(obj).__name__}, not a policy: give a callable "
            "predict(obs) or an object with predict(obs)"
        ) from None
    return obj


def make_env_factory(spec: str) -> Callable[[], Any]:
    """A gymnasium id (``CartPole-v1``) or ``module:factory``; checked now, built later.

    A ``module:factory`` becomes an :class:`EnvFactory`, which checks that
    what it builds is an env.

    Raises:
        click.UsageError: the factory cannot be imported or is not callable, or
            gymnasium does not know the id (with gymnasium's own reason).
    """
    import gymnasium

    if ":" in spec and not spec.split(":", 1)[1].startswith("-"):
        factory = load_object(spec, "env factory")
        if not callable(factory):
            raise click.UsageError(
                f"env factory {spec!r} is a {type(factory).__name__}, not callable"
            )
        return EnvFactory(factory, spec)
    if spec not in gymnasium.registry:
        raise click.UsageError(unknown_env_id_message(spec))
    return EnvIdFactory(spec)


@attrs.frozen
class EnvIdFactory:
    """Makes a fresh ``gymnasium.make(env_id)`` per call; ``label`` names it in reports."""

    env_id: str

    @property
    def label(self) -> str:
        return self.env_id

    def __call__(self) -> Any:
        import gymnasium

        return gymnasium.make(self.env_id)


def resolve_env(spec: str) -> Any:
    """An address (checked now) stays an address; anything else becomes an in-process env
    factory (see :func:`build_first_envs` for checking what a ``module:factory`` builds).

    Raises:
        click.UsageError: as :func:`make_env_factory`.
    """
    return check_address(spec) if is_address(spec) else make_env_factory(spec)


def build_first_envs(routes: Sequence[Any]) -> None:
    """Build each ``module:factory`` route's first env now (the route then uses that env), so
    a factory that fails or returns no env is a usage error before the run starts. Only
    routes that will run are built: ``shard`` leaves out envs that get no episode.

    Raises:
        click.UsageError: as :meth:`EnvFactory.build_now`.
    """
    for route in routes:
        if isinstance(route.env, EnvFactory):
            route.env.build_now()


def resolve_model(spec: str) -> Any:
    """An address stays an address; ``random`` is the random baseline (``rt.RANDOM``);
    ``module:callable`` is imported and run in-process."""
    if is_address(spec):
        return check_address(spec)
    if spec.strip() == "random":
        from ..inprocess._random_model import RANDOM

        return RANDOM
    return load_policy(spec, "model")


def parse_seeds(text: str) -> list[int]:
    """``0:100`` (a range), ``3,5,8`` (a list) or ``7`` (one seed)."""
    try:
        if ":" in text:
            start, _, stop = text.partition(":")
            seeds = list(range(int(start), int(stop)))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.UsageError(
            f"seeds {text!r}: use START:STOP or a comma list of integers"
        ) from None
    if not seeds:
        raise click.UsageError(f"seeds {text!r} selects no seed")
    return seeds


def parse_limits(text: str | None) -> Limits | None:
    """``--timeouts '{"envStepTimeoutMs": 5000}'``: the camelCase millisecond names."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"--timeouts is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise click.UsageError("--timeouts must be a JSON object of camelCase *TimeoutMs names")
    from ..runtime._spec import Limits

    try:
        return Limits.from_json(data)
    except InvalidSpec as exc:
        raise click.UsageError(f"--timeouts: {exc.detail}") from None
