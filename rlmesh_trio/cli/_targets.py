"""Turning command-line words into envs, policies, seeds and limits, with one-line errors."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any

import click

from ..runtime import Limits

__all__ = [
    "is_address",
    "load_object",
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


def load_object(spec: str, what: str) -> Any:
    """Import ``module:attribute`` (attribute may be dotted)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(f"{what} {spec!r} is not of the form module:name")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"{what} {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise click.BadParameter(f"{what} {spec!r}: {module_name!r} has no {attr!r}") from None
    return obj


def make_env_factory(spec: str) -> Callable[[], Any]:
    """A gymnasium id (``CartPole-v1``) or ``module:factory``; checked now, built later."""
    import gymnasium

    if ":" in spec and not spec.split(":", 1)[1].startswith("-"):
        factory = load_object(spec, "env factory")
        if not callable(factory):
            raise click.BadParameter(f"env factory {spec!r} is not callable")
        return factory  # type: ignore[no-any-return]
    if spec not in gymnasium.registry:
        raise click.BadParameter(
            f"unknown gymnasium env id {spec!r} (use a registered id or module:factory)"
        )
    return lambda: gymnasium.make(spec)


def resolve_env(spec: str) -> Any:
    """An address stays an address; anything else becomes an in-process env factory."""
    return spec if is_address(spec) else make_env_factory(spec)


def resolve_model(spec: str) -> Any:
    """An address stays an address; ``random`` is the random baseline (``rt.RANDOM``);
    ``module:callable`` is imported and run in-process."""
    if is_address(spec):
        return spec
    if spec.strip() == "random":
        from .._random_model import RANDOM

        return RANDOM
    return load_object(spec, "model")


def parse_seeds(text: str) -> list[int]:
    """``0:100`` (a range), ``3,5,8`` (a list) or ``7`` (one seed)."""
    try:
        if ":" in text:
            start, _, stop = text.partition(":")
            seeds = list(range(int(start), int(stop)))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"seeds {text!r}: use START:STOP or a comma list of integers"
        ) from None
    if not seeds:
        raise click.BadParameter(f"seeds {text!r} selects no seed")
    return seeds


def parse_limits(text: str | None) -> Limits | None:
    """``--timeouts '{"envStepTimeoutMs": 5000}'``: the camelCase millisecond names."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"--timeouts is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise click.BadParameter("--timeouts must be a JSON object of camelCase *TimeoutMs names")
    try:
        return Limits.from_json(data)
    except Exception as exc:
        raise click.BadParameter(f"--timeouts: {exc}") from None
