"""Route spec and limits: what one route is asked to do, and how long each step may take."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import attrs
import uuid_utils

from .._errors import InvalidSpec
from .._protocol import core_pb

__all__ = [
    "DEFAULT_MAX_EPISODE_STEPS",
    "SEED_MAX",
    "SEED_MIN",
    "Limits",
    "RouteSpec",
    "check_seed_range",
    "mint_uuid7",
]

#: The per-episode step bound rlmesh 0.1.0 applies when no ``max_episode_steps`` is given.
DEFAULT_MAX_EPISODE_STEPS = 100_000
#: Seeds travel as int64 (``ResetRequest.seeds``, ``EpisodeInfo.seed``); the range of one.
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def check_seed_range(seeds: Iterable[int], route_id: str) -> None:
    """Raise :class:`InvalidSpec` naming the route and the first seed the wire cannot carry.

    A seed outside int64 would wrap on the wire (2**64+5 arrives as 5) while
    an in-process env gets it whole, so it is refused on every path alike.
    """
    for seed in seeds:
        if not SEED_MIN <= seed <= SEED_MAX:
            raise InvalidSpec(
                f"route {route_id}: seed {seed} is outside the wire's int64 range [-2**63, 2**63-1]"
            )


def mint_uuid7() -> str:
    """A fresh UUIDv7 string: the runtime is the only authority for env and episode ids."""
    return str(uuid_utils.uuid7())


def _seconds(value: Any) -> float:
    return float(value)


def _finite_number(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
    # Validation is done by ``Limits.validate`` so a bad value can still be loaded and reported
    # with every other problem; attrs only insists on a number here.
    if not isinstance(value, float) or math.isnan(value):
        raise InvalidSpec(f"limits.{attribute.name} must be a number of seconds, got {value!r}")


def _check_json_ms(key: str, value: Any) -> None:
    # Worded in the JSON's own terms (camelCase key, milliseconds as given): the seconds and
    # snake_case names of ``Limits.validate`` would not match what the user wrote.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpec(f"{key} must be a number of milliseconds, got {value!r}")
    if not value > 0:  # also refuses NaN
        raise InvalidSpec(f"{key} must be > 0, got {value!r}")
    if math.isinf(value):
        raise InvalidSpec(f"{key} must be finite, got {value!r}")


@attrs.frozen
class Limits:
    """Per-operation time limits of one route, in seconds (floats).

    The eight limits and their defaults mirror the reference runtime. In JSON
    they travel as integer milliseconds under camelCase names
    (``envResetTimeoutMs`` ...); see :meth:`to_json` / :meth:`from_json`.

    How a limit is kept: every remote call runs through one explicit timer
    (``runtime/_timer.py``) and past its limit raises ``OperationTimeout``
    naming route, component, operation and step. Setup calls (connect,
    configure, resolve) get a deadline cancel scope each (``DeadlineTimer``);
    the hot loop's reset, predict and step calls share one watchdog per loop
    task (``WatchdogTimer``: the whole-env loop, or each lane), which is
    cheaper per call and fires at the same instant. ``service_close_timeout``
    bounds the shielded shutdown; ``telemetry_window`` is a period, not a limit.

    In-process endpoints (``LocalEnv``, ``LocalModel``) keep these limits too:
    a call running in a worker thread is abandoned at its deadline and the
    route fails with ``OperationTimeout`` then; a call running inline on the
    Trio thread (by default a policy's calls, and an env's cheap calls after
    8 timed threaded ones) cannot be interrupted, so one that returns past
    its deadline fails the route with the same ``OperationTimeout`` when it
    returns. Inline calls save the thread handoff: about 55 against 260 us of
    client CPU per step for in-process CartPole routes on a loaded 2-core
    machine (``benchmarks/local_placement.py``).
    """

    env_connect_timeout: float = attrs.field(
        default=60.0, converter=_seconds, validator=_finite_number
    )
    model_connect_timeout: float = attrs.field(
        default=600.0, converter=_seconds, validator=_finite_number
    )
    configure_route_timeout: float = attrs.field(
        default=600.0, converter=_seconds, validator=_finite_number
    )
    env_reset_timeout: float = attrs.field(
        default=300.0, converter=_seconds, validator=_finite_number
    )
    model_predict_timeout: float = attrs.field(
        default=300.0, converter=_seconds, validator=_finite_number
    )
    env_step_timeout: float = attrs.field(
        default=300.0, converter=_seconds, validator=_finite_number
    )
    service_close_timeout: float = attrs.field(
        default=5.0, converter=_seconds, validator=_finite_number
    )
    telemetry_window: float = attrs.field(default=1.0, converter=_seconds, validator=_finite_number)

    JSON_NAMES: ClassVar[Mapping[str, str]] = {
        "env_connect_timeout": "envConnectTimeoutMs",
        "model_connect_timeout": "modelConnectTimeoutMs",
        "configure_route_timeout": "configureRouteTimeoutMs",
        "env_reset_timeout": "envResetTimeoutMs",
        "model_predict_timeout": "modelPredictTimeoutMs",
        "env_step_timeout": "envStepTimeoutMs",
        "service_close_timeout": "serviceCloseTimeoutMs",
        "telemetry_window": "telemetryWindowMs",
    }

    def validate(self) -> None:
        """Raise :class:`InvalidSpec` naming the first limit that is not a positive finite time."""
        for name in self.JSON_NAMES:
            value = getattr(self, name)
            if not (value > 0):
                raise InvalidSpec(f"limits.{name} must be positive, got {value}s")
            if math.isinf(value):
                raise InvalidSpec(f"limits.{name} must be finite, got {value}s")

    def timeout_ms(self, name: str) -> int:
        """A limit in whole milliseconds, as sent in ``ResetRequest/StepRequest.timeout_ms``."""
        return round(getattr(self, name) * 1000)

    def to_json(self) -> dict[str, int]:
        """The limits as ``{"envResetTimeoutMs": 300000, ...}`` (integer milliseconds)."""
        return {json: self.timeout_ms(name) for name, json in self.JSON_NAMES.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limits:
        """Read the camelCase millisecond form; missing names keep their defaults.

        Raises:
            InvalidSpec: an unknown name (every one is named, so a typo never
                silently becomes a default), or a value that is not a positive
                finite number; the message echoes the JSON key and value as
                given ("envStepTimeoutMs must be > 0, got -5").
        """
        if not isinstance(data, Mapping):
            raise InvalidSpec(f"limits must be a JSON object, got {type(data).__name__}")
        by_json = {json: name for name, json in cls.JSON_NAMES.items()}
        unknown = sorted(key for key in data if key not in by_json)
        if unknown:
            raise InvalidSpec(
                "unknown field(s) in limits: "
                + ", ".join(unknown)
                + " (known: "
                + ", ".join(by_json)
                + ")"
            )
        kwargs: dict[str, float] = {}
        for key, value in data.items():
            _check_json_ms(key, value)
            kwargs[by_json[key]] = value / 1000.0
        limits = cls(**kwargs)
        limits.validate()
        return limits


def _opt_int_tuple(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    return tuple(int(v) for v in value)


def _opt_trials(value: Any) -> tuple[int, ...] | range | None:
    # A range stays a range: a million planned trials need no million-int tuple.
    if isinstance(value, range):
        return value
    return _opt_int_tuple(value)


@attrs.frozen
class RouteSpec:
    """One route: an env endpoint paired with a model endpoint, and its episode budget.

    ``env_id`` is the route's routing key on the model (``AdapterContext.env_id``)
    and its request-id prefix; a UUIDv7 is minted when not given. ``contract``
    and ``num_envs`` default to what the env's handshake reports. ``seeds`` are
    claimed one per episode in start order (only with driver-owned resets);
    when ``max_episodes`` is not given it defaults to ``len(seeds)``.
    ``max_episode_steps`` and ``max_episode_seconds`` truncate episodes on the
    runtime side (driver-owned resets only; the built-in bound is 100000
    steps); the time cap is checked after each step, on the run's clock.
    ``execution_horizon`` is sent to the model in ResolveAdapter; extra action
    frames are replayed whatever its value. Episode ``i`` (start order) walks
    trial ``trial_index_base + i``: recorded on its result, and sent as
    ``ResetRequest.options = {"trial_index": ...}`` to an env that lists
    ``trial_index`` under ``rlmesh.env.v1.reset_options`` in its metadata (as
    rlmesh 0.1.0 does; a non-zero base needs driver-owned resets). ``trials``,
    when given, lists episode ``i``'s trial explicitly (one per episode, as
    for ``seeds``): a resumed or retried run walks only the tickets it lacks.
    """

    route_id: str
    session_id: str
    env_component_id: str = "env"
    model_component_id: str = "model"
    env_id: str = attrs.field(factory=mint_uuid7)
    contract: core_pb.EnvContract | None = None
    num_envs: int | None = None
    max_episodes: int | None = None
    close_env_on_end: bool = False
    limits: Limits = attrs.field(factory=Limits)
    seeds: tuple[int, ...] | None = attrs.field(default=None, converter=_opt_int_tuple)
    max_episode_steps: int | None = None
    execution_horizon: int = 1
    max_episode_seconds: float | None = None
    trial_index_base: int = 0
    trials: tuple[int, ...] | range | None = attrs.field(default=None, converter=_opt_trials)

    def trial_for(self, index: int) -> int:
        """The trial episode ``index`` (start order) walks: ``trials[index]`` or base + index."""
        trials = self.trials
        if trials is not None and index < len(trials):
            return trials[index]
        return self.trial_index_base + index

    def validate(self) -> None:
        """Raise :class:`InvalidSpec` for the first problem found; nothing is sent before this."""
        for name in ("route_id", "session_id", "env_component_id", "model_component_id", "env_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidSpec(f"{name} must be a non-empty string")
        if self.num_envs is not None and self.num_envs < 1:
            raise InvalidSpec(f"num_envs must be >= 1, got {self.num_envs}")
        if self.max_episodes is not None and self.max_episodes < 1:
            raise InvalidSpec(f"max_episodes must be >= 1, got {self.max_episodes}")
        if self.seeds is not None:
            if not self.seeds:
                raise InvalidSpec("seeds must not be empty when given")
            check_seed_range(self.seeds, self.route_id)
            if self.max_episodes is not None and self.max_episodes != len(self.seeds):
                raise InvalidSpec(
                    f"max_episodes ({self.max_episodes}) must equal the number of seeds "
                    f"({len(self.seeds)}) when both are given"
                )
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise InvalidSpec(f"max_episode_steps must be >= 1, got {self.max_episode_steps}")
        seconds = self.max_episode_seconds
        if seconds is not None and not (
            isinstance(seconds, int | float) and 0 < seconds < math.inf
        ):
            raise InvalidSpec(f"max_episode_seconds must be a positive number, got {seconds!r}")
        base = self.trial_index_base
        if not isinstance(base, int) or isinstance(base, bool) or base < 0:
            raise InvalidSpec(f"trial_index_base must be >= 0, got {base!r}")
        if self.trials is not None:
            budget = self.episode_budget
            lowest = self.trials.start if isinstance(self.trials, range) else min(self.trials)
            if budget is None or len(self.trials) != budget or lowest < 0:
                raise InvalidSpec(
                    f"trials must list one trial >= 0 per episode ({budget}), got {self.trials}"
                )
        if not 1 <= self.execution_horizon <= 1024:
            raise InvalidSpec(f"execution_horizon must be in 1..1024, got {self.execution_horizon}")
        if self.contract is not None and self.contract.spec is None:
            raise InvalidSpec("contract has no EnvSpec")
        self.limits.validate()

    @property
    def episode_budget(self) -> int | None:
        """Completed episodes after which the route ends (``None``: run until cancelled)."""
        if self.max_episodes is not None:
            return self.max_episodes
        if self.seeds is not None:
            return len(self.seeds)
        return None
