"""The route driver: the reference runtime's run loop, on Trio.

One :class:`RouteDriver` runs one route (an env endpoint paired with a model
endpoint) until its episode budget is spent, then releases the model route.
Three shapes of env are driven:

* single env, driver-owned resets (DISABLED/UNSPECIFIED, ``num_envs == 1``);
* whole-width vector env with env-owned resets (NEXT_STEP, any ``num_envs``):
  new episode ids are rolled into the next ``StepRequest.episode_ids``;
* lanes (DISABLED with the ``subset_step`` capability, ``num_envs > 1``): one
  Trio task per lane in a route-owned nursery, so exactly one request per lane
  is in flight and lanes reset independently (``env_indices=[k]``).

Cancellation: ``run()`` may be cancelled by any enclosing cancel scope. The
driver then records :class:`RouteCancelled` as ``driver.error``, releases the
model route (and closes the env when asked) under a shielded scope bounded by
``limits.service_close_timeout``, fires ``session_failed`` and re-raises
``trio.Cancelled``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import attrs
import trio

from .._editions import EditionOffer, describe_offers, select_edition
from .._errors import (
    EnvRpcError,
    HandshakeError,
    HookError,
    InvalidSpec,
    ModelRouteMismatch,
    ModelRpcError,
    OperationTimeout,
    ProtocolError,
    RlmeshTrioError,
    RouteCancelled,
)
from .._wire import CAP_SUBSET_STEP, WORKFLOW_EDITION, core_pb, env_pb, model_pb, spaces_pb
from ..spaces import check_batch, meta_map_from_python
from ._events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    ObservationEmittedEvent,
    RouteContext,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
    TelemetrySummaryEvent,
    TelemetryWindowEvent,
)
from ._hooks import RuntimeHooks, overrides
from ._meta import TRIAL_INDEX_OPTION, declares_reset_option, episode_success
from ._protocols import EndpointInfo, Reply, RuntimeEnv, RuntimeModel
from ._results import EpisodeRecord, EpisodeResult, RouteReport, record_id
from ._spec import DEFAULT_MAX_EPISODE_STEPS, RouteSpec, mint_uuid7
from ._telemetry import RouteTelemetry
from ._watchdog import OperationWatchdog, current_watchdog

__all__ = ["DEFAULT_CANCEL_REASON", "END_REASON", "RouteDriver"]

_logger = logging.getLogger("rlmesh_trio.runtime")
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

DEFAULT_CANCEL_REASON = "cancelled by caller"
END_REASON = "completed requested episodes"

T = TypeVar("T")


class _Lane:
    """The runtime's view of one env lane and the episode it is running."""

    __slots__ = (
        "active",
        "env_index",
        "episode_id",
        "predict_ms",
        "record",
        "reward",
        "rolling",
        "seed",
        "started_at",
        "step_ms",
        "steps",
        "trial",
    )

    def __init__(self, env_index: int) -> None:
        self.env_index = env_index
        self.episode_id = ""
        self.record: EpisodeRecord | None = None
        self.seed: int | None = None
        self.steps = 0
        self.reward = 0.0
        self.started_at = 0.0
        self.trial: int | None = None
        # Wall times summed over the episode's steps (means on its result).
        self.predict_ms = 0.0
        self.step_ms = 0.0
        self.active = False
        # NEXT_STEP: a new id was minted for this lane; the next step is its roll step,
        # which counts for neither episode.
        self.rolling = False


class _Replay:
    """A predict response's action frames, used one per step (execution horizon)."""

    __slots__ = ("charge", "frames", "pos")

    def __init__(self) -> None:
        self.frames: Sequence[spaces_pb.SpaceValue] = ()
        self.pos = 0
        #: The predict wall time (ms) charged to each step a frame serves.
        self.charge = 0.0

    def take(self) -> spaces_pb.SpaceValue | None:
        """The next buffered frame, or ``None`` when the model must be asked again."""
        if self.pos < len(self.frames):
            frame = self.frames[self.pos]
            self.pos += 1
            return frame
        return None

    def load(
        self, frames: Sequence[spaces_pb.SpaceValue], predict_ms: float
    ) -> spaces_pb.SpaceValue:
        self.frames = frames
        self.pos = 1
        self.charge = predict_ms / len(frames)
        return frames[0]

    def flush(self) -> None:
        self.frames = ()
        self.pos = 0


def _route_error(exc: BaseException) -> BaseException | None:
    """The route error inside ``exc``, or ``None`` when ``exc`` is only cancellation."""
    if isinstance(exc, trio.Cancelled):
        return None
    if isinstance(exc, BaseExceptionGroup):
        for leaf in exc.exceptions:
            found = _route_error(leaf)
            if found is not None:
                return found
        return None
    return exc


def _first_cancelled(exc: BaseException) -> BaseException:
    """A bare ``trio.Cancelled`` from a group of them, so callers see a plain Cancelled."""
    if isinstance(exc, BaseExceptionGroup):
        for leaf in exc.exceptions:
            found = _first_cancelled(leaf)
            if isinstance(found, trio.Cancelled):
                return found
    return exc


class RouteDriver:
    """Runs one route: the reset -> predict -> step loop of the reference driver.

    ``hooks`` observe events and may transform values; ``cancel_reason`` is
    called when the route is cancelled from outside, to fill
    :class:`RouteCancelled` (default ``"cancelled by caller"``). ``on_error``
    is called with the route error as soon as it is known, before the
    shutdown-after-failure path runs, so an orchestrator can cancel sibling
    routes without waiting for this route's bounded cleanup. The driver
    never closes the endpoints' connections (``aclose``): whoever made the
    endpoints owns them.
    """

    def __init__(
        self,
        spec: RouteSpec,
        env: RuntimeEnv,
        model: RuntimeModel,
        hooks: RuntimeHooks | None = None,
        cancel_reason: Callable[[], str] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.spec = spec
        self._on_error = on_error
        self.env = env
        self.model = model
        self.hooks: RuntimeHooks = hooks if hooks is not None else RuntimeHooks()
        self._cancel_reason = cancel_reason
        #: The route error after a failure or cancellation (``RouteCancelled``), else ``None``.
        self.error: BaseException | None = None
        #: The runtime step: env steps completed so far (all lanes together).
        self.step = 0
        self.ctx = RouteContext(
            session_id=spec.session_id,
            route_id=spec.route_id,
            env_id=spec.env_id,
            env_component_id=spec.env_component_id,
            model_component_id=spec.model_component_id,
        )
        self.contract: core_pb.EnvContract | None = None
        self.edition: str | None = None
        self.num_envs = 1
        self._ran = False
        self._seq = 0
        self._episodes: list[EpisodeResult] = []
        self._episodes_started = 0
        self._seed_pos = 0
        self._lanes: list[_Lane] = []
        self._next_step = False
        self._lanes_mode = False
        self._action_space: spaces_pb.SpaceSpec | None = None
        self._observation_space: spaces_pb.SpaceSpec | None = None
        self._max_steps = spec.max_episode_steps or DEFAULT_MAX_EPISODE_STEPS
        self._max_seconds = spec.max_episode_seconds
        self._budget = spec.episode_budget
        self._trial_base = spec.trial_index_base
        self._trial_option = False
        limits = spec.limits
        self._reset_ms = limits.timeout_ms("env_reset_timeout")
        self._step_ms = limits.timeout_ms("env_step_timeout")
        self._telemetry = RouteTelemetry(limits.telemetry_window, 0.0)
        self._now: Callable[[], float] = trio.current_time
        self._bg: trio.Nursery | None = None
        self._model_touched = False
        self._env_touched = False
        self._terminal_done = False
        self._failed_emitted = False
        # Which hook methods do anything: events nobody listens to are never built.
        h = self.hooks if hooks is not None else None
        self._h_started = overrides(h, "episode_started")
        self._h_completed = overrides(h, "episode_completed")
        self._h_action = overrides(h, "action_received")
        self._h_t_action = overrides(h, "transform_action")
        self._h_step = overrides(h, "step_completed")
        self._h_obs = overrides(h, "observation_emitted")
        self._h_t_obs = overrides(h, "transform_observation")
        self._h_window = overrides(h, "telemetry_window")
        self._h_log = overrides(h, "log")

    # ------------------------------------------------------------------ public

    @property
    def total_episodes(self) -> int:
        return len(self._episodes)

    def report(self) -> RouteReport:
        """Everything so far: usable after a failure (finished episodes are kept)."""
        return RouteReport(
            route_id=self.spec.route_id,
            session_id=self.spec.session_id,
            env_id=self.spec.env_id,
            total_steps=self.step,
            total_episodes=len(self._episodes),
            episodes=tuple(self._episodes),
            telemetry=self._telemetry.summary(),
            samples=self._telemetry.snapshot(),
        )

    async def run(self) -> RouteReport:
        """Run the route to its episode budget and return its report.

        Raises the route error (``InvalidSpec``, ``HandshakeError``,
        ``OperationTimeout``, ``EnvRpcError``, ``ModelRpcError``,
        ``ModelRouteMismatch``, ``ProtocolError``, ``HookError``, ...) after the
        shutdown-after-failure path has run; ``driver.error`` holds it too.
        Cancellation from an enclosing scope records ``RouteCancelled`` and
        re-raises ``trio.Cancelled``. A driver runs once.
        """
        if self._ran:
            raise RuntimeError("a RouteDriver runs once; make a new one")
        self._ran = True
        try:
            self.spec.validate()
        except InvalidSpec as exc:
            self.error = exc
            raise
        # The run's clock, read directly in the hot loop (a MockClock in tests).
        self._now = trio.lowlevel.current_clock().current_time
        # Window rows are only built when a hook listens for them (the totals always are).
        self._telemetry = RouteTelemetry(
            self.spec.limits.telemetry_window, self._now(), windows=self._h_window
        )
        try:
            await self._emit("session_started", SessionStartedEvent(self.ctx))
            async with trio.open_nursery() as bg:
                self._bg = bg
                await self._setup()
                if self._lanes_mode:
                    await self._run_lanes()
                else:
                    async with self._watched():
                        await self._run_whole()
                # Pending best-effort ResetAdapters get the close timeout to finish.
                close = self.spec.limits.service_close_timeout
                bg.cancel_scope.deadline = min(bg.cancel_scope.deadline, self._now() + close)
            self._bg = None
            await self._flush_telemetry()
        except BaseException as exc:
            error = _route_error(exc)
            if error is None:
                reason = self._reason()
                self.error = RouteCancelled(self.spec.route_id, self.step, reason)
                await self._shutdown_after_failure(self.error)
                raise _first_cancelled(exc) from None
            self.error = error
            if self._on_error is not None:
                try:
                    self._on_error(error)
                except Exception as cb_exc:
                    _logger.warning(
                        "route %s: on_error callback failed: %s", self.spec.route_id, cb_exc
                    )
            await self._shutdown_after_failure(error)
            if error is exc:
                raise
            # Unwrapped from a nursery's group: keep the error's own cause, drop the group.
            raise error from error.__cause__
        finally:
            self._bg = None
        await self._shutdown_terminal(END_REASON)
        await self._emit(
            "session_ended",
            SessionEndedEvent(self.ctx, END_REASON, self.step, len(self._episodes)),
        )
        return self.report()

    def _reason(self) -> str:
        """The cancellation reason from the caller's callback (never raises)."""
        if self._cancel_reason is None:
            return DEFAULT_CANCEL_REASON
        try:
            return str(self._cancel_reason())
        except Exception as exc:
            _logger.warning("route %s: cancel_reason callback failed: %s", self.spec.route_id, exc)
            return DEFAULT_CANCEL_REASON

    # ------------------------------------------------------------------ setup

    async def _setup(self) -> None:
        spec, limits = self.spec, self.spec.limits
        env_info, model_info = await self._concurrently(
            lambda: self._env_call("env.connect", limits.env_connect_timeout, self.env.connect),
            lambda: self._model_call(
                "model.connect", limits.model_connect_timeout, self.model.connect
            ),
        )
        contract = self._check_contract(env_info)
        offers = [
            # (ignores: mypy's attrs plugin cannot type EditionOffer's ``converter=tuple``)
            EditionOffer("env", env_info.editions, env_info.preferred_edition),  # type: ignore[arg-type]
            EditionOffer("model", model_info.editions, model_info.preferred_edition),  # type: ignore[arg-type]
            EditionOffer("runtime", (WORKFLOW_EDITION,), WORKFLOW_EDITION),  # type: ignore[arg-type]
        ]
        edition = select_edition(offers)
        if edition is None:
            raise HandshakeError(env_info.label, describe_offers(offers))
        self.edition = edition
        resolve = model_pb.ResolveAdapterRequest(
            context=self._context("resolve_adapter"),
            env_spec=contract.spec,
            selected_workflow_edition=edition,
            execution_horizon=spec.execution_horizon,
        )
        self._env_touched = True
        self._model_touched = True
        await self._concurrently(
            lambda: self._env_call(
                "env.configure", limits.configure_route_timeout, self.env.configure, edition
            ),
            lambda: self._model_call(
                "model.resolve_adapter",
                limits.configure_route_timeout,
                self.model.resolve_adapter,
                resolve,
            ),
        )

    def _check_contract(self, env_info: EndpointInfo) -> core_pb.EnvContract:
        """Validate the contract and autoreset mode exactly as the 0.1.0 runtime does (§4.1)."""
        spec = self.spec
        contract = spec.contract if spec.contract is not None else env_info.contract
        if contract is None or contract.spec is None:
            raise ProtocolError(f"env endpoint {env_info.label} reported no env contract")
        if contract.spec.action_space is None or contract.spec.observation_space is None:
            raise ProtocolError(
                f"env endpoint {env_info.label} sent an env contract without "
                "an action space and an observation space"
            )
        mode = int(contract.autoreset_mode)
        if mode not in (0, 1, 2, 3):
            raise ProtocolError(
                f"invalid spaces spec from env: decode error: unknown autoreset mode {mode}"
            )
        if mode == core_pb.AutoresetMode.SAME_STEP:
            raise InvalidSpec(
                "SAME_STEP autoreset is reserved but not yet supported by the runtime; "
                "construct the env with NEXT_STEP or DISABLED autoreset"
            )
        num_envs = contract.num_envs or 1
        if spec.num_envs is not None and contract.num_envs and spec.num_envs != num_envs:
            raise InvalidSpec(
                f"num_envs={spec.num_envs} does not match the env contract (num_envs={num_envs})"
            )
        if spec.num_envs is not None:
            num_envs = spec.num_envs
        self._next_step = mode == core_pb.AutoresetMode.NEXT_STEP
        self._trial_option = declares_reset_option(contract.spec.metadata, TRIAL_INDEX_OPTION)
        if self._next_step:
            if spec.seeds is not None:
                raise InvalidSpec(
                    "episode_seeds requires an env with autoreset disabled; this env reports "
                    "NEXT_STEP autoreset and owns its resets"
                )
            if spec.max_episode_steps is not None or spec.max_episode_seconds is not None:
                raise InvalidSpec(
                    "max_episode_steps / max_episode_seconds require an env with autoreset "
                    "disabled; this env reports NEXT_STEP autoreset and owns its resets"
                )
            if spec.trial_index_base:
                raise InvalidSpec(
                    "trial_index_base requires an env with autoreset disabled; this env reports "
                    "NEXT_STEP autoreset and owns its resets"
                )
        elif num_envs > 1 and not env_info.has_capability(CAP_SUBSET_STEP):
            raise InvalidSpec(
                "vectorized runtime sessions (num_envs > 1) require NEXT_STEP autoreset unless "
                "the env steps lanes individually (the `subset_step` capability); this env "
                f"reports num_envs={num_envs} with autoreset disabled and no `subset_step`"
            )
        self._lanes_mode = not self._next_step and num_envs > 1
        self.num_envs = num_envs
        self.contract = contract
        self._action_space = contract.spec.action_space
        self._observation_space = contract.spec.observation_space
        return contract

    # ------------------------------------------------------------------ remote calls

    def _context(self, phase: str) -> model_pb.AdapterContext:
        self._seq += 1
        env_id = self.spec.env_id
        return model_pb.AdapterContext(
            session_id=self.spec.session_id,
            env_id=env_id,
            request_id=f"{env_id}:{phase}:{self._seq:06d}",
        )

    async def _env_call(
        self,
        op: str,
        timeout: float,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        step: int | None = None,
    ) -> T:
        """One env operation under its timeout; failures become route errors.

        ``step`` is the runtime step the operation is reported at (default: the
        current one; a step request reports the step its action produces).
        """
        if step is None:
            step = self.step
        return await self._timed(
            self.spec.env_component_id, op, step, timeout, self._env_attempt(op, step, fn(*args))
        )

    async def _timed(
        self, component: str, op: str, step: int, timeout: float, call: Awaitable[T]
    ) -> T:
        """Await ``call`` within ``timeout``; past it, ``OperationTimeout`` names the operation.

        The hot loop's task is guarded by an :class:`OperationWatchdog` (no
        cancel scope per call); elsewhere the call gets its own deadline scope.
        """
        deadline = self._now() + timeout
        watchdog = current_watchdog()
        if watchdog is None:
            with trio.CancelScope(deadline=deadline):
                return await call
            raise OperationTimeout(self.spec.route_id, component, op, step, timeout)
        watchdog.arm(deadline, (component, op, step, timeout))
        try:
            return await call
        finally:
            watchdog.disarm()

    async def _env_attempt(self, op: str, step: int, call: Awaitable[T]) -> T:
        try:
            return await call
        except EnvRpcError as exc:
            if exc.operation == op and exc.step == step:
                raise
            raise EnvRpcError(
                op, step, exc.message, code=exc.code, recoverable=exc.recoverable
            ) from exc
        except RlmeshTrioError:
            raise
        except Exception as exc:
            raise EnvRpcError(op, step, f"{type(exc).__name__}: {exc}") from exc

    async def _model_call(
        self, op: str, timeout: float, fn: Callable[..., Awaitable[T]], *args: Any
    ) -> T:
        """One model operation under its timeout; failures become route errors."""
        component = self.spec.model_component_id
        return await self._timed(
            component, op, self.step, timeout, self._model_attempt(component, fn(*args))
        )

    async def _model_attempt(self, component: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except ModelRpcError as exc:
            if exc.component_id == component:
                raise
            raise ModelRpcError(
                component, exc.message, code=exc.code, recoverable=exc.recoverable
            ) from exc
        except RlmeshTrioError:
            raise
        except Exception as exc:
            raise ModelRpcError(component, f"{type(exc).__name__}: {exc}") from exc

    def _watched(self) -> AbstractAsyncContextManager[None]:
        """Guard a hot loop's task: its env and model calls time out through one watchdog."""
        route_id = self.spec.route_id
        watchdog: OperationWatchdog[tuple[str, str, int, float]] = OperationWatchdog()
        return watchdog.guard(lambda timed: OperationTimeout(route_id, *timed))

    async def _concurrently(self, *fns: Callable[[], Awaitable[Any]]) -> list[Any]:
        """Run ``fns`` at once; the first failure cancels the rest and is raised bare."""
        results: list[Any] = [None] * len(fns)
        failures: list[BaseException] = []

        async with trio.open_nursery() as nursery:

            async def one(i: int, fn: Callable[[], Awaitable[Any]]) -> None:
                try:
                    results[i] = await fn()
                except Exception as exc:
                    if not failures:
                        failures.append(exc)
                    nursery.cancel_scope.cancel()

            for i, fn in enumerate(fns):
                nursery.start_soon(one, i, fn)
        if failures:
            raise failures[0]
        return results

    async def _predict(
        self, rows: Sequence[_Lane], observation: spaces_pb.SpaceValue | None, is_reset: bool
    ) -> tuple[list[spaces_pb.SpaceValue], float]:
        """The model's action frames for ``rows``, and the predict's wall time (ms)."""
        ctx = self._context("reset_observation" if is_reset else "step_observation")
        request = model_pb.PredictRequest(
            context=ctx,
            observation=observation,
            episode_info=[model_pb.EpisodeInfo(episode_id=r.episode_id, seed=r.seed) for r in rows],
        )
        started = self._now()
        reply: Reply[model_pb.PredictResponse] = await self._model_call(
            "model.predict", self.spec.limits.model_predict_timeout, self.model.predict, request
        )
        rpc_ms = (self._now() - started) * 1000.0
        self._telemetry.add_operation(
            "model.predict", self.spec.model_component_id, rpc_ms, reply.telemetry
        )
        response = reply.response
        got = response.context
        # The whole AdapterContext must come back (compared field by field, cheaply).
        if got is not ctx and (
            got is None
            or got.request_id != ctx.request_id
            or got.env_id != ctx.env_id
            or got.session_id != ctx.session_id
        ):
            raise ModelRouteMismatch(self.spec.model_component_id, ctx.request_id)
        if not response.actions:
            raise ProtocolError(
                f"model endpoint {self.spec.model_component_id} returned a predict response "
                "with no actions"
            )
        return response.actions, rpc_ms

    async def _env_reset(self, request: env_pb.ResetRequest) -> env_pb.ResetResponse:
        started = self._now()
        reply: Reply[env_pb.ResetResponse] = await self._env_call(
            "env.reset", self.spec.limits.env_reset_timeout, self.env.reset, request
        )
        self._telemetry.add_operation(
            "env.reset",
            self.spec.env_component_id,
            (self._now() - started) * 1000.0,
            reply.telemetry,
        )
        response = reply.response
        self._check_observation(response.observation, len(request.env_indices), "reset")
        return response

    def _check_observation(self, value: spaces_pb.SpaceValue | None, lanes: int, op: str) -> None:
        """Refuse an observation whose slabs do not fit the contract (blame the env, not the model).

        A framing check (no values decoded): leaf count, exact slab sizes and
        text headers, for the lanes this reply covers.
        """
        space = self._observation_space
        if space is None:
            return
        component = self.spec.env_component_id
        if value is None:
            raise ProtocolError(
                f"environment endpoint {component} returned a {op} response with no observation"
            )
        try:
            check_batch(space, value, lanes or self.num_envs)
        except ProtocolError as exc:
            raise ProtocolError(
                f"environment endpoint {component} returned a malformed observation on {op} "
                f"at runtime step {self.step}: {exc.detail}",
                path=exc.path,
            ) from None

    async def _env_step(self, request: env_pb.StepRequest) -> tuple[env_pb.StepResponse, float]:
        """The env's step response, and the step's wall time (ms)."""
        started = self._now()
        # An env failure or timeout is reported at the step this action produces.
        reply: Reply[env_pb.StepResponse] = await self._env_call(
            "env.step",
            self.spec.limits.env_step_timeout,
            self.env.step,
            request,
            step=self.step + 1,
        )
        self.step += 1
        rpc_ms = (self._now() - started) * 1000.0
        self._telemetry.add_operation(
            "env.step", self.spec.env_component_id, rpc_ms, reply.telemetry
        )
        self._telemetry.window_steps += 1
        response = reply.response
        self._check_observation(response.observation, len(request.env_indices), "step")
        return response, rpc_ms

    # ------------------------------------------------------------------ episodes

    def _start(self, lane: _Lane, auto: bool) -> None:
        """Mint an id for ``lane``'s next episode and claim its seed (episode start order)."""
        index = self._episodes_started
        self._episodes_started += 1
        seed: int | None = None
        seeds = self.spec.seeds
        if seeds is not None and not self._next_step and self._seed_pos < len(seeds):
            seed = seeds[self._seed_pos]
            self._seed_pos += 1
        episode_id = mint_uuid7()
        lane.episode_id = episode_id
        lane.seed = seed
        lane.record = EpisodeRecord(record_id(index), index, episode_id, lane.env_index, seed, auto)
        lane.steps = 0
        lane.reward = 0.0
        lane.predict_ms = lane.step_ms = 0.0
        lane.trial = None if self._next_step else self.spec.trial_for(index)
        lane.active = True
        lane.rolling = False
        lane.started_at = self._now()

    def _reset_options(self, lane: _Lane) -> spaces_pb.MetaMap | None:
        """``{"trial_index": ...}`` for an env that declared that reset option, else nothing."""
        if not self._trial_option or lane.trial is None:
            return None
        return meta_map_from_python({TRIAL_INDEX_OPTION: lane.trial})

    async def _announce(self, lanes: Sequence[_Lane]) -> None:
        if not self._h_started:
            return
        for lane in lanes:
            record = lane.record
            assert record is not None
            await self._emit(
                "episode_started",
                EpisodeStartedEvent(
                    self.ctx,
                    episode_id=record.episode_id,
                    episode_record_id=record.record_id,
                    episode_index=record.index,
                    env_index=record.env_index,
                    seed=record.seed,
                    started_from_auto_reset=record.started_from_auto_reset,
                ),
            )

    async def _finish(self, lane: _Lane, meta: env_pb.EpisodeMetadata | None) -> None:
        """Record the end of ``lane``'s episode: an env completion, or runtime truncation."""
        record = lane.record
        assert record is not None
        lane.active = False
        lane.rolling = False
        wall = self._now() - lane.started_at
        final_info = None
        if meta is not None:
            steps, reward = meta.step_count, meta.cumulative_reward
            terminated, truncated = meta.terminated, meta.truncated
            final_info = meta.final_info
            start_ns, end_ns = meta.start_timestamp_ns, meta.end_timestamp_ns
            duration = (end_ns - start_ns) / 1e9 if start_ns > 0 and end_ns >= start_ns else wall
        else:
            steps, reward, terminated, truncated, duration = (
                lane.steps,
                lane.reward,
                False,
                True,
                wall,
            )
        result = EpisodeResult(
            index=record.index,
            episode_id=record.episode_id,
            env_index=lane.env_index,
            seed=record.seed,
            steps=steps,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            success=episode_success(final_info),
            duration_s=duration,
            record_id=record.record_id,
            predict_ms=lane.predict_ms / lane.steps if lane.steps else None,
            step_ms=lane.step_ms / lane.steps if lane.steps else None,
            trial=lane.trial,
        )
        self._episodes.append(result)
        if self._h_completed:
            await self._emit(
                "episode_completed",
                EpisodeCompletedEvent(
                    self.ctx,
                    episode_id=record.episode_id,
                    episode_record_id=record.record_id,
                    episode_index=record.index,
                    env_index=lane.env_index,
                    step_count=steps,
                    cumulative_reward=reward,
                    terminated=terminated,
                    truncated=truncated,
                    duration_ms=duration * 1000.0,
                    final_info=final_info,
                    result=result,
                ),
            )
        if self._bg is not None:
            self._bg.start_soon(self._reset_adapter, record.episode_id)

    def _budget_spent(self) -> bool:
        return self._budget is not None and len(self._episodes) >= self._budget

    async def _complete(self, response: env_pb.StepResponse) -> bool:
        """Match the step's completions to our episodes; then runtime truncation. Any ended?"""
        ended = False
        lanes = self._lanes
        for meta in response.completed_episodes:
            if self._budget_spent():
                break
            k = meta.env_index
            lane = lanes[k] if 0 <= k < len(lanes) else None
            if lane is None or not lane.active or lane.episode_id != meta.episode_id:
                await self._log(
                    "debug",
                    f"dropping a stale env-reported episode completion "
                    f"(episode_id={meta.episode_id!r}, env_index={k})",
                )
                continue
            await self._finish(lane, meta)
            ended = True
        if not self._next_step:
            max_seconds = self._max_seconds
            now = self._now() if max_seconds is not None else 0.0
            for lane in lanes:
                if not lane.active or self._budget_spent():
                    continue
                if lane.steps >= self._max_steps:
                    cap = f"the step cap ({self._max_steps})"
                elif max_seconds is not None and now - lane.started_at >= max_seconds:
                    cap = f"the time cap ({max_seconds}s)"
                else:
                    continue
                await self._log(
                    "info",
                    f"truncating episode {lane.episode_id} on env_index {lane.env_index} at {cap}",
                )
                await self._finish(lane, None)
                ended = True
        return ended

    async def _reset_adapter(self, episode_id: str) -> None:
        """Best-effort ResetAdapter for a finished episode (runs in the route's nursery)."""
        request = model_pb.ResetAdapterRequest(
            context=self._context("reset_adapter"), episode_ids=[episode_id]
        )
        timeout = self.spec.limits.model_predict_timeout
        started = self._now()
        try:
            with trio.move_on_after(timeout) as scope:
                await self.model.reset_adapter(request)
            if scope.cancelled_caught:
                await self._log("warning", f"model reset_adapter timed out after {timeout}s")
            else:
                self._telemetry.add(
                    "model.reset_adapter",
                    self.spec.model_component_id,
                    "rpc.total",
                    (self._now() - started) * 1000.0,
                )
        except Exception as exc:
            await self._log("warning", f"model reset_adapter failed (ignored): {exc}")

    # ------------------------------------------------------------------ hooks

    async def _emit(self, name: str, event: Any) -> None:
        """A best-effort event: a failing hook is logged and the route goes on."""
        try:
            await getattr(self.hooks, name)(event)
        except Exception as exc:
            _logger.warning("route %s: runtime hook %s failed: %s", self.spec.route_id, name, exc)
            if name != "log" and self._h_log:
                try:
                    await self.hooks.log(
                        LogEvent(self.ctx, "warning", f"runtime hook {name} failed: {exc}")
                    )
                except Exception as log_exc:
                    _logger.warning(
                        "route %s: runtime hook log failed: %s", self.spec.route_id, log_exc
                    )

    async def _transform(self, name: str, event: Any) -> spaces_pb.SpaceValue | None:
        """A transform: its failure is fatal to the route (``HookError``)."""
        try:
            value: spaces_pb.SpaceValue | None = await getattr(self.hooks, name)(event)
        except HookError:
            raise
        except Exception as exc:
            _logger.warning("route %s: runtime hook %s failed: %s", self.spec.route_id, name, exc)
            raise HookError(f"{name} failed: {type(exc).__name__}: {exc}") from exc
        return value

    async def _log(self, level: str, message: str) -> None:
        _logger.log(_LEVELS.get(level, logging.INFO), "route %s: %s", self.spec.route_id, message)
        if self._h_log:
            await self._emit("log", LogEvent(self.ctx, level, message))

    def _observation_event(
        self, rows: Sequence[_Lane], observation: spaces_pb.SpaceValue | None, is_reset: bool
    ) -> ObservationEmittedEvent:
        first = rows[0]
        return ObservationEmittedEvent(
            self.ctx,
            episode_id=first.episode_id,
            episode_record_id=first.record.record_id if first.record else "",
            episode_ids=tuple(r.episode_id for r in rows),
            episode_record_ids=tuple(r.record.record_id if r.record else "" for r in rows),
            env_indices=tuple(r.env_index for r in rows),
            step=self.step,
            env_index=first.env_index,
            is_reset=is_reset,
            num_envs=self.num_envs,
            observation_space=self._observation_space,
            observation=observation,
        )

    async def _outgoing_observation(
        self, rows: Sequence[_Lane], observation: spaces_pb.SpaceValue | None, is_reset: bool
    ) -> spaces_pb.SpaceValue | None:
        """transform_observation (fatal), then observation_emitted for reset observations.

        Step observations are emitted right after their step (untransformed), as
        the reference driver does.
        """
        emit = is_reset and self._h_obs
        if not (self._h_t_obs or emit):
            return observation
        event = self._observation_event(rows, observation, is_reset)
        if self._h_t_obs:
            started = self._now()
            changed = await self._transform("transform_observation", event)
            self._telemetry.add(
                "runner.transform_observation",
                "runner",
                "rpc.total",
                (self._now() - started) * 1000.0,
            )
            if changed is not None:
                observation = changed
                event = attrs.evolve(event, observation=changed)
        if emit:
            await self._emit("observation_emitted", event)
        return observation

    async def _next_action(
        self,
        lanes: Sequence[_Lane],
        outgoing: spaces_pb.SpaceValue | None,
        is_reset: bool,
        replay: _Replay,
    ) -> spaces_pb.SpaceValue:
        """The action for this step: a replayed frame, or a fresh predict; then the transform."""
        action = replay.take()
        if action is None:
            action = replay.load(*await self._predict(lanes, outgoing, is_reset))
        return await self._outgoing_action(lanes, action)

    async def _outgoing_action(
        self, rows: Sequence[_Lane], action: spaces_pb.SpaceValue
    ) -> spaces_pb.SpaceValue:
        if not (self._h_t_action or self._h_action):
            return action
        first = rows[0]
        event = ActionReceivedEvent(
            self.ctx,
            episode_id=first.episode_id,
            episode_record_id=first.record.record_id if first.record else "",
            episode_ids=tuple(r.episode_id for r in rows),
            episode_record_ids=tuple(r.record.record_id if r.record else "" for r in rows),
            env_indices=tuple(r.env_index for r in rows),
            step=self.step + 1,
            env_index=first.env_index,
            action_space=self._action_space,
            action=action,
        )
        if self._h_t_action:
            started = self._now()
            changed = await self._transform("transform_action", event)
            self._telemetry.add(
                "runner.transform_action", "runner", "rpc.total", (self._now() - started) * 1000.0
            )
            if changed is not None:
                action = changed
                event = attrs.evolve(event, action=changed)
        if self._h_action:
            await self._emit("action_received", event)
        return action

    async def _after_step(
        self,
        rows: Sequence[_Lane],
        response: env_pb.StepResponse,
        round_started: float,
    ) -> None:
        """Telemetry, step_completed, the telemetry window, observation_emitted."""
        now = self._now()
        telemetry = self._telemetry
        telemetry.add("runner.round", "runner", "rpc.total", (now - round_started) * 1000.0)
        if self._h_step:
            first = rows[0]
            await self._emit(
                "step_completed",
                StepCompletedEvent(
                    self.ctx,
                    episode_id=first.episode_id,
                    episode_record_id=first.record.record_id if first.record else "",
                    step=self.step,
                    env_index=first.env_index,
                    env_indices=tuple(r.env_index for r in rows),
                    rewards=tuple(response.rewards),
                ),
            )
        if now >= telemetry.window_deadline:
            await self._emit_window(now)
        if self._h_obs:
            await self._emit(
                "observation_emitted", self._observation_event(rows, response.observation, False)
            )

    async def _emit_window(self, now: float) -> None:
        window = self._telemetry.take_window(now)
        if window is not None and self._h_window:
            start, end, steps, rows = window
            await self._emit(
                "telemetry_window", TelemetryWindowEvent(self.ctx, start, end, steps, rows)
            )

    async def _flush_telemetry(self) -> None:
        await self._emit_window(self._now())
        await self._emit(
            "telemetry_summary",
            TelemetrySummaryEvent(
                self.ctx, self.step, len(self._episodes), self._telemetry.summary()
            ),
        )

    # ------------------------------------------------------------------ loops

    async def _reset_whole(self, lanes: Sequence[_Lane], auto: bool) -> spaces_pb.SpaceValue | None:
        """A whole-width reset with fresh ids (and, with driver-owned resets, the next seed)."""
        for lane in lanes:
            self._start(lane, auto)
        seeds = [lane.seed for lane in lanes if lane.seed is not None]
        request = env_pb.ResetRequest(
            seeds=seeds if len(seeds) == len(lanes) else [],
            options=self._reset_options(lanes[0]) if len(lanes) == 1 else None,
            timeout_ms=self._reset_ms,
            episode_ids=[lane.episode_id for lane in lanes],
        )
        started = self._now()
        response = await self._env_reset(request)
        if not auto:
            await self._log(
                "info",
                f"env reset complete in {(self._now() - started) * 1000.0:.0f}ms "
                f"({len(lanes)} episode(s) ready)",
            )
        await self._announce(lanes)
        return response.observation

    async def _run_whole(self) -> None:
        """Single env (driver-owned resets) or whole-width vector env (NEXT_STEP)."""
        lanes = self._lanes = [_Lane(k) for k in range(self.num_envs)]
        next_step = self._next_step
        observation = await self._reset_whole(lanes, auto=False)
        is_reset = True
        replay = _Replay()
        step_ms = self._step_ms
        while True:
            round_started = self._now()
            outgoing = await self._outgoing_observation(lanes, observation, is_reset)
            action = await self._next_action(lanes, outgoing, is_reset, replay)
            response, took_ms = await self._env_step(
                env_pb.StepRequest(
                    action=action,
                    timeout_ms=step_ms,
                    episode_ids=[lane.episode_id for lane in lanes],
                )
            )
            rewards = response.rewards
            charge = replay.charge
            for k, lane in enumerate(lanes):
                if lane.rolling:
                    lane.rolling = False
                    continue
                lane.steps += 1
                lane.predict_ms += charge
                lane.step_ms += took_ms
                if k < len(rewards):
                    lane.reward += rewards[k]
            await self._after_step(lanes, response, round_started)
            ended = await self._complete(response)
            if self._budget_spent():
                return
            if ended:
                # Buffered frames were planned for episodes that are over.
                replay.flush()
                if next_step:
                    rolled = [lane for lane in lanes if not lane.active]
                    for lane in rolled:
                        self._start(lane, auto=True)
                        lane.rolling = True
                    await self._announce(rolled)
                else:
                    observation = await self._reset_whole(lanes, auto=True)
                    is_reset = True
                    continue
            observation = response.observation
            is_reset = False

    async def _run_lanes(self) -> None:
        """Lanes: one task per lane, one request per lane in flight, per-lane resets."""
        self._lanes = [_Lane(k) for k in range(self.num_envs)]
        # Initial episodes are claimed in lane order, so lane k gets the k-th seed whatever
        # order the lane tasks happen to run in; lanes beyond the budget stay idle.
        for lane in self._lanes:
            if self._budget is None or self._episodes_started < self._budget:
                self._start(lane, auto=False)
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:

            async def lane_task(lane: _Lane) -> None:
                try:
                    async with self._watched():
                        await self._drive_lane(lane)
                except Exception as exc:
                    if not failures:
                        failures.append(exc)
                    nursery.cancel_scope.cancel()

            for lane in self._lanes:
                if lane.active:
                    nursery.start_soon(lane_task, lane)
        if failures:
            raise failures[0]

    async def _drive_lane(self, lane: _Lane) -> None:
        budget = self._budget
        rows = (lane,)
        indices = [lane.env_index]
        step_ms = self._step_ms
        while True:
            if not lane.active:  # the first episode was claimed by _run_lanes
                if budget is not None and self._episodes_started >= budget:
                    return
                self._start(lane, auto=True)
            response = await self._env_reset(
                env_pb.ResetRequest(
                    seeds=[lane.seed] if lane.seed is not None else [],
                    options=self._reset_options(lane),
                    timeout_ms=self._reset_ms,
                    env_indices=indices,
                    episode_ids=[lane.episode_id],
                )
            )
            await self._announce(rows)
            observation = response.observation
            is_reset = True
            replay = _Replay()
            while lane.active:
                round_started = self._now()
                outgoing = await self._outgoing_observation(rows, observation, is_reset)
                action = await self._next_action(rows, outgoing, is_reset, replay)
                step, took_ms = await self._env_step(
                    env_pb.StepRequest(
                        action=action,
                        timeout_ms=step_ms,
                        env_indices=indices,
                        episode_ids=[lane.episode_id],
                    )
                )
                if lane.active:
                    lane.steps += 1
                    lane.predict_ms += replay.charge
                    lane.step_ms += took_ms
                    if step.rewards:
                        lane.reward += step.rewards[0]
                await self._after_step(rows, step, round_started)
                await self._complete(step)
                if self._budget_spent():
                    return
                observation = step.observation
                is_reset = False

    # ------------------------------------------------------------------ shutdown

    async def _shutdown_after_failure(self, error: BaseException) -> None:
        """Release/close with the error text as reason, then ``session_failed`` (once)."""
        reason = str(error)
        await self._shutdown_terminal(reason)
        if self._failed_emitted:
            return
        self._failed_emitted = True
        with trio.CancelScope(shield=True):
            with trio.move_on_after(self.spec.limits.service_close_timeout):
                await self._emit("session_failed", SessionFailedEvent(self.ctx, reason, error))

    async def _shutdown_terminal(self, reason: str) -> None:
        """Release the model route and (with ``close_env_on_end``) close the env, both at once.

        Shielded and bounded by the service close timeout, so it runs while the
        route is being cancelled and never hangs; failures are logged only.
        """
        if self._terminal_done:
            return
        self._terminal_done = True
        timeout = self.spec.limits.service_close_timeout
        close_env = self.spec.close_env_on_end and self._env_touched
        if not (self._model_touched or close_env):
            return
        with trio.CancelScope(shield=True):
            with trio.move_on_after(timeout) as scope:
                async with trio.open_nursery() as nursery:
                    if self._model_touched:
                        nursery.start_soon(self._release_model, reason, timeout)
                    if close_env:
                        nursery.start_soon(self._close_env, timeout)
            if scope.cancelled_caught:
                await self._log(
                    "warning",
                    f"route shutdown did not finish within {timeout}s; relying on owner shutdown",
                )

    async def _release_model(self, reason: str, timeout: float) -> None:
        request = model_pb.ReleaseAdapterRequest(
            context=self._context("release_adapter"), reason=reason
        )
        try:
            await self.model.release_adapter(request, timeout)
        except Exception as exc:
            await self._log(
                "warning",
                f"model route release failed during route shutdown; relying on owner "
                f"shutdown: {exc}",
            )

    async def _close_env(self, timeout: float) -> None:
        try:
            final = await self.env.close(timeout)
        except Exception as exc:
            await self._log("warning", f"environment close failed during route shutdown: {exc}")
            return
        await self._log("debug", f"environment closed ({len(final)} final episode(s))")
