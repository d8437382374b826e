"""A route's remote operations: each timed, its failure turned into a route error.

:class:`RouteCalls` is the only place the driver talks to its endpoints
during a run (the shutdown's release/close aside). Each call takes the
:class:`~._timer.OperationTimer` of the task making it, so the caller chooses
how its limit is kept. It also owns the runtime step counter, because an
env step is what advances it and every error names it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import trio

from .._endpoints import (
    EncodesObservations,
    PredictsLeaves,
    Reply,
    RuntimeEnv,
    RuntimeModel,
    StepsOnLeaves,
)
from .._errors import EnvRpcError, ModelRouteMismatch, ModelRpcError, ProtocolError, RlmeshTrioError
from .._protocol import env_pb, model_pb, spaces_pb
from .._wire._step_parts import StepParts
from ..spaces import check_batch
from ._episodes import Lane
from ._spec import RouteSpec
from ._telemetry import OperationRecorder, RouteTelemetry
from ._timer import OperationTimer

__all__ = ["RouteCalls", "concurrently"]

T = TypeVar("T")

#: A model that sends no endpoint telemetry (an in-process one) is booked with this.
_NO_TELEMETRY: dict[str, float] = {}


@attrs.define(eq=False)
class RouteCalls:
    """The env and model operations of one route, with their telemetry and checks."""

    spec: RouteSpec
    env: RuntimeEnv
    model: RuntimeModel
    telemetry: RouteTelemetry
    now: Callable[[], float]
    #: The runtime step: env steps completed so far (all lanes together).
    step: int = attrs.field(default=0, init=False)
    #: The observation space replies are checked against (set once the session is open).
    observation_space: spaces_pb.SpaceSpec | None = attrs.field(default=None, init=False)
    num_envs: int = attrs.field(default=1, init=False)
    _seq: int = attrs.field(default=0, init=False)
    # The per-step operations' telemetry recorders, looked up once.
    _predicts: OperationRecorder = attrs.field(init=False)
    _steps: OperationRecorder = attrs.field(init=False)
    #: The step timeout as a request carries it (ms).
    _step_ms: int = attrs.field(init=False)

    _framing_trusted: bool = attrs.field(default=False, init=False)
    # The last predict's episode infos and the (episode id, seed) pairs they were built
    # from: the same for every step of an episode, so they are built once per episode.
    _infos: list[model_pb.EpisodeInfo] = attrs.field(factory=list, init=False)
    _infos_key: list[tuple[str, int | None]] = attrs.field(factory=list, init=False)
    # "<env_id>:<phase>:" of each phase's request ids.
    _id_prefixes: dict[str, str] = attrs.field(factory=dict, init=False)

    def set_observation_space(self, space: spaces_pb.SpaceSpec | None) -> None:
        """Check replies against ``space`` from now on (the session's contract).

        An env endpoint that encodes its observations in this process with the
        codec, for exactly this spec object (:class:`EncodesObservations`:
        ``LocalEnv``), frames them right by construction, so the per-step framing
        check is skipped. A remote endpoint is no such thing: whatever a server
        claims, its bytes are always checked.
        """
        self.observation_space = space
        env = self.env
        own = env.encoded_observation_space if isinstance(env, EncodesObservations) else None
        self._framing_trusted = space is not None and own is space

    def __attrs_post_init__(self) -> None:
        self._step_ms = self.spec.limits.timeout_ms("env_step_timeout")
        self._predicts = self.telemetry.recorder("model.predict", self.spec.model_component_id)
        self._steps = self.telemetry.recorder("env.step", self.spec.env_component_id)

    def context(self, phase: str) -> model_pb.AdapterContext:
        """A fresh ``AdapterContext`` whose request id names the phase and a sequence number."""
        self._seq += 1
        spec = self.spec
        prefix = self._id_prefixes.get(phase)
        if prefix is None:
            prefix = self._id_prefixes[phase] = f"{spec.env_id}:{phase}:"
        return model_pb.AdapterContext(
            session_id=spec.session_id,
            env_id=spec.env_id,
            # zfill(6) pads a sequence number as the format spec 06d does, at half its cost.
            request_id=prefix + str(self._seq).zfill(6),
        )

    def episode_infos(self, rows: Sequence[Lane]) -> list[model_pb.EpisodeInfo]:
        """The predict request's ``episode_info`` for ``rows`` (reused while their episodes
        and seeds stay the same: nothing downstream changes a request)."""
        key = [(r.episode_id, r.seed) for r in rows]
        if key != self._infos_key:
            self._infos_key = key
            self._infos = [model_pb.EpisodeInfo(episode_id=i, seed=s) for i, s in key]
        return self._infos

    async def env_call(
        self,
        timer: OperationTimer,
        op: str,
        timeout: float,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        step: int | None = None,
    ) -> T:
        """One env operation under its timeout; failures become route errors.

        ``step`` is the runtime step the operation is reported at (default: the
        current one; a step request reports the step its action produces).

        Raises:
            OperationTimeout: past ``timeout``.
            EnvRpcError: the env failed (re-labelled with ``op`` and ``step``).
        """
        if step is None:
            step = self.step
        call = fn(*args)
        # The failure is translated outside the timer's limit: the timer only ever raises
        # its own OperationTimeout, which passes through unchanged.
        try:
            with timer.limit(self.spec.env_component_id, op, step, timeout):
                return await call
        except Exception as exc:
            error = _env_error(exc, op, step)
            if error is None:
                raise
            raise error from exc

    async def model_call(
        self,
        timer: OperationTimer,
        op: str,
        timeout: float,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
    ) -> T:
        """One model operation under its timeout; failures become route errors.

        Raises:
            OperationTimeout: past ``timeout``.
            ModelRpcError: the model failed (re-labelled with this route's component).
        """
        component = self.spec.model_component_id
        call = fn(*args)
        try:  # translated outside the limit, as in env_call
            with timer.limit(component, op, self.step, timeout):
                return await call
        except Exception as exc:
            error = _model_error(exc, component)
            if error is None:
                raise
            raise error from exc

    async def predict(
        self,
        timer: OperationTimer,
        rows: Sequence[Lane],
        observation: spaces_pb.SpaceValue | None,
        is_reset: bool,
    ) -> tuple[list[spaces_pb.SpaceValue], float]:
        """The model's action frames for ``rows``, and the predict's wall time (ms).

        The reply is checked here, for every model (remote, in-process, batched):
        clients hand it back as the model sent it.

        Raises:
            ModelRouteMismatch: the reply carried another request's context.
            ProtocolError: the reply had no actions.
        """
        ctx = self.context("reset_observation" if is_reset else "step_observation")
        request = model_pb.PredictRequest(
            context=ctx,
            observation=observation,
            episode_info=self.episode_infos(rows),
        )
        spec = self.spec
        started = self.now()
        # model_call's body, inline: a suspended predict has two frames less to resume.
        component = spec.model_component_id
        call = self.model.predict(request)
        try:
            with timer.limit(
                component, "model.predict", self.step, spec.limits.model_predict_timeout
            ):
                reply: Reply[model_pb.PredictResponse] = await call
        except Exception as exc:
            error = _model_error(exc, component)
            if error is None:
                raise
            raise error from exc
        rpc_ms = (self.now() - started) * 1000.0
        self._predicts.operation(rpc_ms, reply.telemetry)
        response = reply.response
        got = response.context
        # The whole AdapterContext must come back, compared field by field: a message's
        # ``==`` walks betterproto2's class metadata (several us per predict).
        if got is not ctx and (
            got is None
            or got.request_id != ctx.request_id
            or got.env_id != ctx.env_id
            or got.session_id != ctx.session_id
        ):
            raise ModelRouteMismatch(spec.model_component_id, ctx.request_id)
        if not response.actions:
            raise ProtocolError(
                f"model endpoint {spec.model_component_id} returned a predict response "
                "with no actions"
            )
        return response.actions, rpc_ms

    async def reset(
        self, timer: OperationTimer, request: env_pb.ResetRequest
    ) -> env_pb.ResetResponse:
        """The env's reset response, its observation checked against the contract."""
        started = self.now()
        reply: Reply[env_pb.ResetResponse] = await self.env_call(
            timer, "env.reset", self.spec.limits.env_reset_timeout, self.env.reset, request
        )
        self.telemetry.add_operation(
            "env.reset",
            self.spec.env_component_id,
            (self.now() - started) * 1000.0,
            reply.telemetry,
        )
        response = reply.response
        self.check_observation(response.observation, len(request.env_indices), "reset")
        return response

    async def step_env(
        self, timer: OperationTimer, request: env_pb.StepRequest
    ) -> tuple[env_pb.StepResponse, float]:
        """The env's step response, and the step's wall time (ms); advances the runtime step."""
        started = self.now()
        # env_call's body, inline (two frames less to resume); an env failure or timeout
        # is reported at the step this action produces.
        step = self.step + 1
        call = self.env.step(request)
        try:
            with timer.limit(
                self.spec.env_component_id, "env.step", step, self.spec.limits.env_step_timeout
            ):
                reply: Reply[env_pb.StepResponse] = await call
        except Exception as exc:
            error = _env_error(exc, "env.step", step)
            if error is None:
                raise
            raise error from exc
        rpc_ms = self._stepped(started, reply.telemetry)
        response = reply.response
        self.check_observation(response.observation, len(request.env_indices), "step")
        return response, rpc_ms

    def _stepped(self, started: float, endpoint: Mapping[str, float]) -> float:
        """Count a completed env step (begun at ``started``) and book its telemetry;
        return its wall time (ms)."""
        self.step += 1
        rpc_ms = (self.now() - started) * 1000.0
        self._steps.operation(rpc_ms, endpoint)
        telemetry = self.telemetry
        telemetry.window_steps += 1
        telemetry.steps_to_fold -= 1
        if not telemetry.steps_to_fold:
            telemetry.fold()
        return rpc_ms

    def env_takes_leaves(self) -> bool:
        """Whether this route's env is an in-process one that steps on an action's frame
        leaves with no messages (:meth:`step_leaves`): it frames its observations by
        construction for the session's own spec, so nothing is checked per step either
        way."""
        env = self.env
        return self._framing_trusted and isinstance(env, StepsOnLeaves) and env.steps_on_leaves

    def takes_leaves(self) -> bool:
        """Whether this route's env and model are an in-process pair that can trade frame
        leaves with no messages (:meth:`predict_leaves`, :meth:`step_leaves`): the env
        :meth:`env_takes_leaves`, and the model answers this route's predicts one action
        at a time with a synchronous policy."""
        model = self.model
        return (
            self.env_takes_leaves()
            and isinstance(model, PredictsLeaves)
            and model.takes_leaves(self.spec.env_id)
        )

    async def predict_leaves(
        self, timer: OperationTimer, rows: Sequence[Lane], leaves: list[bytes], is_reset: bool
    ) -> tuple[list[bytes], float]:
        """:meth:`predict` of a pair that :meth:`takes_leaves`, the observation and action
        as frame leaves: the action, and the predict's wall time (ms). When the model
        cannot answer so right now, this is :meth:`predict` itself.

        Raises:
            OperationTimeout, ModelRpcError: as :meth:`predict`.
        """
        spec = self.spec
        started = self.now()
        self._seq += 1  # the request id a PredictRequest would have taken
        model: Any = self.model
        action: list[bytes] | None = await self.model_call(
            timer,
            "model.predict",
            spec.limits.model_predict_timeout,
            model.predict_leaves,
            spec.env_id,
            leaves,
        )
        if action is None:
            self._seq -= 1
            frame = spaces_pb.SpaceValue(leaves=leaves)
            frames, rpc_ms = await self.predict(timer, rows, frame, is_reset)
            return frames[0].leaves, rpc_ms  # one action per predict: see takes_leaves
        rpc_ms = (self.now() - started) * 1000.0
        self._predicts.operation(rpc_ms, _NO_TELEMETRY)
        return action, rpc_ms

    async def step_leaves(
        self,
        timer: OperationTimer,
        action: list[bytes],
        request: Callable[[spaces_pb.SpaceValue], env_pb.StepRequest],
    ) -> tuple[StepParts | env_pb.StepResponse, float]:
        """:meth:`step_env` of a pair that :meth:`takes_leaves`, the action as its frame's
        leaves: the step's answer as ``StepParts``, and its wall time (ms). When the
        env cannot answer so right now, this is :meth:`step_env` of ``request(frame)``.

        Raises:
            OperationTimeout, EnvRpcError: as :meth:`step_env`.
        """
        started = self.now()
        env: Any = self.env
        answer: tuple[StepParts, dict[str, float]] | None = await self.env_call(
            timer,
            "env.step",
            self.spec.limits.env_step_timeout,
            env.step_leaves,
            action,
            self._step_ms,
            step=self.step + 1,
        )
        if answer is None:
            return await self.step_env(timer, request(spaces_pb.SpaceValue(leaves=action)))
        parts, endpoint = answer
        return parts, self._stepped(started, endpoint)

    def check_observation(self, value: spaces_pb.SpaceValue | None, lanes: int, op: str) -> None:
        """Refuse an observation whose slabs do not fit the contract (blame the env, not the model).

        A framing check (no values decoded): leaf count, exact slab sizes and
        text headers, for the lanes this reply covers.

        Raises:
            ProtocolError: naming the env component, the operation and the step.
        """
        space = self.observation_space
        if space is None:
            return
        component = self.spec.env_component_id
        if value is None:
            raise ProtocolError(
                f"environment endpoint {component} returned a {op} response with no observation"
            )
        if self._framing_trusted:
            return
        try:
            check_batch(space, value, lanes or self.num_envs)
        except ProtocolError as exc:
            raise ProtocolError(
                f"environment endpoint {component} returned a malformed observation on {op} "
                f"at runtime step {self.step}: {exc.detail}",
                path=exc.path,
            ) from None


def _env_error(exc: Exception, op: str, step: int) -> Exception | None:
    """The route error an env operation's failure becomes; ``None``: ``exc`` itself.

    Our own errors pass unchanged, except an ``EnvRpcError`` naming another
    operation or step, which is re-labelled with ``op`` and ``step``.
    """
    if isinstance(exc, RlmeshTrioError):
        if isinstance(exc, EnvRpcError) and (exc.operation != op or exc.step != step):
            return EnvRpcError(
                op,
                step,
                exc.message,
                code=exc.code,
                recoverable=exc.recoverable,
                env_index=exc.env_index,
            )
        return None
    return EnvRpcError(op, step, f"{type(exc).__name__}: {exc}")


def _model_error(exc: Exception, component: str) -> Exception | None:
    """The route error a model operation's failure becomes; ``None``: ``exc`` itself.

    Our own errors pass unchanged, except a ``ModelRpcError`` naming another
    component, which is re-labelled with this route's.
    """
    if isinstance(exc, RlmeshTrioError):
        if isinstance(exc, ModelRpcError) and exc.component_id != component:
            return ModelRpcError(
                component,
                exc.message,
                code=exc.code,
                recoverable=exc.recoverable,
                env_index=exc.env_index,
            )
        return None
    return ModelRpcError(component, f"{type(exc).__name__}: {exc}")


async def concurrently(*fns: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run ``fns`` at once and return their results in order.

    Cancellation: cancelling the caller cancels every one of them.
    Raises:
        Exception: the first failure, bare (it cancels the rest).
    """
    results: list[Any] = [None] * len(fns)
    failures: list[BaseException] = []
    if not fns:
        return results

    async with trio.open_nursery() as nursery:

        async def one(i: int, fn: Callable[[], Awaitable[Any]]) -> None:
            try:
                results[i] = await fn()
            except Exception as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()

        *others, last = fns
        for i, fn in enumerate(others):
            nursery.start_soon(one, i, fn)
        # The last one in this task: one task fewer to spawn (a route's setup makes two
        # such pairs, and many in-process routes set up at once).
        await one(len(others), last)
    if failures:
        raise failures[0]
    return results
