"""What one route is made of, and how seeds are dealt across routes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import attrs

from .._errors import InvalidSpec
from ..runtime._hooks import HookChain, RuntimeHooks
from ..runtime._spec import Limits, check_seed_range
from ..transport._address import parse_address

__all__ = ["Route", "route_hooks", "shard"]

MAX_EXECUTION_HORIZON = 1024
Dealing = Literal["static", "dynamic"]
_DEALINGS = ("static", "dynamic")


def _seeds(value: Iterable[int] | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    seeds = tuple(value)
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidSpec(f"seeds must be integers, got {seed!r}")
    return seeds


def _check_route(route: Route) -> None:
    for endpoint in (route.env, route.model):
        if isinstance(endpoint, str):
            parse_address(endpoint)  # a malformed address fails here, before the run
    if route.episodes is not None and route.episodes < 1:
        raise InvalidSpec(
            f"route {route.route_id or '?'}: episodes must be >= 1, got {route.episodes}"
        )
    if route.seeds is not None:
        if not route.seeds:
            raise InvalidSpec(f"route {route.route_id or '?'}: seeds is empty")
        check_seed_range(route.seeds, route.route_id or "?")
        if route.episodes is not None and route.episodes != len(route.seeds):
            raise InvalidSpec(
                f"route {route.route_id or '?'}: episodes={route.episodes} does not match "
                f"len(seeds)={len(route.seeds)}"
            )
    if not 1 <= route.execution_horizon <= MAX_EXECUTION_HORIZON:
        raise InvalidSpec(
            f"route {route.route_id or '?'}: execution_horizon must be in "
            f"1..{MAX_EXECUTION_HORIZON}, got {route.execution_horizon}"
        )
    if route.max_episode_steps is not None and route.max_episode_steps < 1:
        raise InvalidSpec(
            f"route {route.route_id or '?'}: max_episode_steps must be >= 1, "
            f"got {route.max_episode_steps}"
        )
    seconds = route.max_episode_seconds
    if seconds is not None and not (isinstance(seconds, int | float) and 0 < seconds < math.inf):
        raise InvalidSpec(
            f"route {route.route_id or '?'}: max_episode_seconds must be a positive number, "
            f"got {seconds!r}"
        )
    base = route.trial_index_base
    if base is not None and (not isinstance(base, int) or isinstance(base, bool) or base < 0):
        raise InvalidSpec(
            f"route {route.route_id or '?'}: trial_index_base must be >= 0, got {base!r}"
        )


@attrs.frozen(eq=False, repr=False)
class Route:
    """One environment endpoint paired with one model endpoint.

    ``env`` is an address (``host:port``, ``tcp://host:port``, ``unix:///path``),
    a gymnasium env, a list of envs (served as lanes), a zero-argument env
    factory, or any :class:`~rlmesh_trio.RuntimeEnv`. ``model`` is an
    address, a policy (a callable ``obs -> action``, an object with
    ``predict``/``predict_batch``, a torch ``nn.Module``, or a
    :class:`~rlmesh_trio.TorchPolicy` / ``JaxPolicy`` / ``SB3Policy``), or any
    :class:`~rlmesh_trio.RuntimeModel`.

    ``seeds`` gives one seed per episode and sets the episode count unless
    ``episodes`` is also given, in which case the two must agree. With
    neither, the route runs until cancelled. ``max_episode_steps`` and
    ``max_episode_seconds`` truncate episodes on the runtime side (envs whose
    resets the runtime owns; refused for NEXT_STEP envs, as in rlmesh).
    Episode ``i`` of the route walks trial ``trial_index_base + i`` (see
    :class:`~rlmesh_trio.RouteSpec`). Left at ``None`` (the default),
    the run deals trial blocks: the routes without a base get consecutive
    blocks in route order, starting after the highest block an explicit base
    claims, so no two planned episodes of a run walk the same trial (a route
    without an episode budget walks trials 0, 1, ... unless given a base).

    ``ticket_pool``: routes that name the same pool share ONE list of
    episodes (their seeds/episodes, caps and trial base must agree): each
    route runs the next unclaimed episodes whenever its endpoint is free, so
    a slow endpoint runs fewer and a dead one's unfinished episodes go to the
    others (``shard(..., dealing="dynamic")`` makes such routes).
    ``hooks`` are this route's own,
    run after the run-wide ones: a ``RuntimeHooks``, or a callable that gets
    the route's resolved ``RuntimeEnv`` when the route starts and returns one
    (a video recorder uses it to reach ``render``).
    """

    env: Any
    model: Any
    seeds: tuple[int, ...] | None = attrs.field(default=None, converter=_seeds)
    episodes: int | None = None
    route_id: str | None = None
    limits: Limits | None = None
    close_env_on_end: bool = False
    max_episode_steps: int | None = None
    execution_horizon: int = 1
    max_episode_seconds: float | None = None
    trial_index_base: int | None = None
    ticket_pool: str | None = None
    hooks: RuntimeHooks | Callable[[Any], RuntimeHooks] | None = None

    def __attrs_post_init__(self) -> None:
        _check_route(self)

    def __repr__(self) -> str:
        # Counts, not contents: a route of a million seeds or 64 lanes is one short line;
        # fields left at their default are not shown.
        parts = [f"env={_short(self.env, 'envs')}", f"model={_short(self.model, 'models')}"]
        for field in attrs.fields(Route)[2:]:
            value = getattr(self, field.name)
            if value != field.default:
                parts.append(f"{field.name}={_short(value, field.name)}")
        return f"Route({', '.join(parts)})"

    @property
    def episode_budget(self) -> int | None:
        """How many episodes this route runs (``None``: until cancelled)."""
        if self.episodes is not None:
            return self.episodes
        if self.seeds is not None:
            return len(self.seeds)
        return None


#: Longer reprs of a route's parts print as their type's name.
_REPR_WIDTH = 80


def _short(value: Any, things: str) -> str:
    """``value``'s repr, or a count (a sequence of more than 8) or its type (a long repr)."""
    if isinstance(value, list | tuple) and len(value) > 8:
        return f"<{len(value)} {things}>"
    text = repr(value)
    if len(text) > _REPR_WIDTH or "\n" in text:
        return f"<{type(value).__name__}>"
    return text


def route_hooks(shared: RuntimeHooks | None, route: Route, env: Any) -> RuntimeHooks | None:
    """The hooks one route runs with: the run's, then the route's own (built for ``env``)."""
    own = route.hooks
    if own is None:
        return shared
    if not isinstance(own, RuntimeHooks):
        own = own(env)
    return own if shared is None else HookChain([shared, own])


#: What ``shard``'s ``route_options`` may set: a Route's fields, less those it deals itself.
_SHARD_OPTIONS = frozenset(
    name
    for field in attrs.fields(Route)
    if field.init
    and (name := field.alias or field.name)
    not in {"env", "model", "seeds", "episodes", "route_id", "ticket_pool"}
)


def shard(
    envs: Sequence[Any],
    model: Any,
    seeds: Iterable[int] | None = None,
    *,
    episodes: int | None = None,
    route_id_prefix: str = "route",
    dealing: Dealing = "static",
    **route_options: Any,
) -> list[Route]:
    """One route per env, sharing ``model``, with seeds or episodes dealt out deterministically.

    Seeds are dealt round-robin: with three envs, env 0 gets seeds 0, 3, 6, ...,
    env 1 gets 1, 4, 7, ... . An episode count is split as evenly as possible,
    earlier routes taking the remainder. Envs that would get nothing are left out.
    ``route_options`` go to every :class:`Route` (limits, close_env_on_end, ...),
    except that a ``trial_index_base`` is dealt in blocks: each route starts
    where the previous route's episodes end, so every episode of the run walks
    its own trial. Without one the routes keep ``trial_index_base=None`` and
    the run deals the same blocks from trial 0.

    ``dealing="dynamic"`` deals nothing up front: every route gets the whole
    list in one ``ticket_pool`` (named ``route_id_prefix``) and endpoints take
    the next episodes as they come free (meant for identical env endpoints).
    Episode ``i`` of the list keeps seed ``seeds[i]`` and trial ``base + i``
    whichever endpoint runs it.

    Nothing is connected or run here: every check is on the values given.

    Raises:
        InvalidSpec: no envs; an unknown ``dealing``; both or neither of
            ``seeds`` and ``episodes``; an empty seed list; a seed that is not
            an integer or out of range; ``episodes`` not an integer >= 1; an env
            or model address that does not parse; or a ``route_options`` name or
            value that :class:`Route` refuses (an unknown option, a bad limit, a
            negative cap).
        TypeError: ``envs`` has no length (a generator: pass a list).
    """
    if not envs:
        raise InvalidSpec("shard needs at least one env")
    if episodes is not None and (isinstance(episodes, bool) or not isinstance(episodes, int)):
        raise InvalidSpec(f"shard: episodes must be an integer >= 1, got {episodes!r}")
    unknown = sorted(set(route_options) - _SHARD_OPTIONS)
    if unknown:
        raise InvalidSpec(
            f"shard: unknown route option(s) {', '.join(unknown)}; a Route takes "
            f"{', '.join(sorted(_SHARD_OPTIONS))}"
        )
    if dealing not in _DEALINGS:
        raise InvalidSpec(f"dealing must be one of {_DEALINGS}, got {dealing!r}")
    if dealing == "dynamic":
        return _shard_dynamic(envs, model, seeds, episodes, route_id_prefix, route_options)
    if seeds is not None and episodes is not None:
        raise InvalidSpec("shard takes seeds or episodes, not both")
    count = len(envs)
    routes: list[Route] = []
    factory: Callable[..., Route] = Route
    if seeds is not None:
        return _deal_trials(_deal_seeds(envs, model, seeds, route_id_prefix, route_options))
    if episodes is None:
        raise InvalidSpec("shard needs seeds or episodes")
    if episodes < 1:
        raise InvalidSpec(f"shard: episodes must be >= 1, got {episodes}")
    base, extra = divmod(episodes, count)
    for i, env in enumerate(envs):
        n = base + (1 if i < extra else 0)
        if n:
            routes.append(
                factory(
                    env=env,
                    model=model,
                    episodes=n,
                    route_id=f"{route_id_prefix}-{i}",
                    **route_options,
                )
            )
    return _deal_trials(routes)


def _deal_seeds(
    envs: Sequence[Any], model: Any, seeds: Iterable[int], prefix: str, options: dict[str, Any]
) -> list[Route]:
    """Seeds round-robin over ``envs``; envs that would get none are left out."""
    seed_list = _seeds(seeds) or ()
    if not seed_list:
        raise InvalidSpec("shard got an empty seed list")
    count = len(envs)
    return [
        Route(env=env, model=model, seeds=dealt, route_id=f"{prefix}-{i}", **options)
        for i, env in enumerate(envs)
        if (dealt := seed_list[i::count])
    ]


def _shard_dynamic(
    envs: Sequence[Any],
    model: Any,
    seeds: Iterable[int] | None,
    episodes: int | None,
    prefix: str,
    options: dict[str, Any],
) -> list[Route]:
    if seeds is not None and episodes is not None:
        raise InvalidSpec("shard takes seeds or episodes, not both")
    seed_list = _seeds(seeds) if seeds is not None else None
    if seed_list is None and episodes is None:
        raise InvalidSpec("shard needs seeds or episodes")
    if seed_list is not None and not seed_list:
        raise InvalidSpec("shard got an empty seed list")
    return [
        Route(
            env=env,
            model=model,
            seeds=seed_list,
            episodes=episodes,
            route_id=f"{prefix}-{i}",
            ticket_pool=prefix,
            **options,
        )
        for i, env in enumerate(envs)
    ]


def _deal_trials(routes: list[Route]) -> list[Route]:
    """Give the routes consecutive blocks of trial ordinals, starting at the shared base.

    Without a base (``None``) the routes are left as they are: the run deals
    the same blocks from 0 (see :func:`~rlmesh_trio.orchestrator._plan.deal_trial_bases`).
    """
    if not routes or routes[0].trial_index_base is None:
        return routes
    dealt, next_trial = [], routes[0].trial_index_base
    for route in routes:
        dealt.append(attrs.evolve(route, trial_index_base=next_trial))
        next_trial += route.episode_budget or 0
    return dealt
