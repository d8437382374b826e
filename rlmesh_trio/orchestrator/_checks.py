"""Whole-run checks on a set of routes, made before any route starts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .._endpoints import RuntimeEnv
from .._errors import InvalidSpec
from ._route import Route

__all__ = ["check_distinct_env_objects"]


def _env_objects(value: Any) -> Iterator[Any]:
    """The env objects a route would step: itself, or each lane of a list.

    Addresses and factories are left out: an address is a connection each
    route makes for itself, and a factory makes a new env per route.
    """
    if isinstance(value, str):
        return
    if isinstance(value, list | tuple):
        yield from value
        return
    if isinstance(value, RuntimeEnv) or not callable(value):
        yield value


def check_distinct_env_objects(routes: Sequence[Route], route_ids: Sequence[str]) -> None:
    """Refuse one env object (a gymnasium env, a lane, a ``RuntimeEnv``) in two places.

    Two routes stepping one env at once interleave its episodes, and both
    would report corrupt results as ``completed``.

    Raises:
        InvalidSpec: naming both routes (or the route twice, for a lane listed
            twice) and the env's type.
    """
    owner: dict[int, str] = {}
    for route, route_id in zip(routes, route_ids, strict=True):
        for env in _env_objects(route.env):
            first = owner.setdefault(id(env), route_id)
            if first != route_id or _listed_twice(route.env, env):
                raise InvalidSpec(
                    f"route {route_id}: its env ({type(env).__name__} object) is also the env "
                    f"of route {first}; one env object can serve one route (and one lane) only: "
                    "give each route its own env, or an env factory"
                )


def _listed_twice(value: Any, env: Any) -> bool:
    return isinstance(value, list | tuple) and sum(1 for item in value if item is env) > 1
