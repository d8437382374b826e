"""The route driver: the reference runtime's run loop, on Trio.

One :class:`RouteDriver` runs one route (an env endpoint paired with a model
endpoint) until its episode budget is spent, then releases the model route.
The work is layered, one module a job:

* ``_timer.py`` -- the timed operation (a deadline scope per call, or one
  watchdog per loop task), explicit at every call;
* ``_calls.py`` -- the remote operations, their telemetry and reply checks;
* ``_session.py`` -- handshake, contract, edition, configure/resolve;
* ``_episodes.py`` -- episode ids, seeds, trials, results, completion matching;
* ``_loop.py`` -- the loop itself: reset, predict, step, record, stop;
* ``_modes.py`` -- one strategy per drive mode (whole env, NEXT_STEP vector, lanes);
* ``_hook_gate.py`` -- how hooks are called, and which ones listen.

This module runs them in order and owns the route's outcome: its error, its
report and its shutdown.

Cancellation: ``run()`` may be cancelled by any enclosing cancel scope. The
driver then records :class:`RouteCancelled` as ``driver.error``, releases the
model route (and closes the env when asked) under a shielded scope bounded by
``limits.service_close_timeout``, fires ``session_failed`` and re-raises
``trio.Cancelled``.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from .._endpoints import RuntimeEnv, RuntimeModel
from .._errors import InvalidSpec, RouteCancelled
from .._groups import first_cancelled, first_error
from .._protocol import core_pb, model_pb
from ._calls import RouteCalls
from ._episodes import EpisodeBook
from ._events import (
    RouteContext,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from ._fused import FusedSeat
from ._hook_gate import HookGate, logger
from ._hooks import RuntimeHooks
from ._loop import RouteLoop
from ._modes import drive_route
from ._results import RouteReport
from ._session import Session, configure, handshake
from ._spec import RouteSpec
from ._telemetry import RouteTelemetry
from ._timer import DeadlineTimer

__all__ = ["DEFAULT_CANCEL_REASON", "END_REASON", "RouteDriver"]

DEFAULT_CANCEL_REASON = "cancelled by caller"
END_REASON = "completed requested episodes"


class RouteDriver:
    """Runs one route: the reset -> predict -> step loop of the reference driver.

    ``hooks`` observe events and may transform values; ``cancel_reason`` is
    called when the route is cancelled from outside, to fill
    :class:`RouteCancelled` (default ``"cancelled by caller"``). ``on_error``
    is called with the route error as soon as it is known, before the
    shutdown-after-failure path runs, so an orchestrator can cancel sibling
    routes without waiting for this route's bounded cleanup. The driver
    never closes the endpoints' connections (``aclose``): whoever made the
    endpoints owns them. ``fused``: the route's seat in a fused block (routes
    sharing one in-process policy, driven by one task; see ``_fused.py``),
    taken when the route can be fused; the driver releases it after setup.
    """

    def __init__(
        self,
        spec: RouteSpec,
        env: RuntimeEnv,
        model: RuntimeModel,
        hooks: RuntimeHooks | None = None,
        cancel_reason: Callable[[], str] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        fused: FusedSeat | None = None,
    ) -> None:
        self.spec = spec
        self._fused = fused
        self._on_error = on_error
        self.env = env
        self.model = model
        self._cancel_reason = cancel_reason
        #: The route error after a failure or cancellation (``RouteCancelled``), else ``None``.
        self.error: BaseException | None = None
        self.ctx = RouteContext(
            session_id=spec.session_id,
            route_id=spec.route_id,
            env_id=spec.env_id,
            env_component_id=spec.env_component_id,
            model_component_id=spec.model_component_id,
        )
        self._gate = HookGate(hooks, self.ctx)
        self.hooks: RuntimeHooks = self._gate.hooks
        self.contract: core_pb.EnvContract | None = None
        self.edition: str | None = None
        self.num_envs = 1
        self._ran = False
        self._now: Callable[[], float] = trio.current_time
        self._parts(RouteTelemetry(spec.limits.telemetry_window, 0.0))
        self._configure_sent = False
        self._terminal_done = False
        self._failed_emitted = False
        #: The report once ``run()`` has returned or raised: nothing changes after that.
        self._final: RouteReport | None = None
        self._over = False

    def _parts(self, telemetry: RouteTelemetry) -> None:
        """The route's telemetry, remote calls and episode book, on the driver's clock."""
        self._telemetry = telemetry
        self._calls = RouteCalls(self.spec, self.env, self.model, telemetry, self._now)
        self._book = EpisodeBook(self.spec, self._now)

    # ------------------------------------------------------------------ public

    @property
    def step(self) -> int:
        """The runtime step: env steps completed so far (all lanes together)."""
        return self._calls.step

    @property
    def total_episodes(self) -> int:
        return len(self._book.results)

    def report(self) -> RouteReport:
        """Everything so far: usable after a failure (finished episodes are kept).

        Built once after ``run()`` ended (its telemetry summary sorts every sample)."""
        if self._final is not None:
            return self._final
        report = RouteReport(
            route_id=self.spec.route_id,
            session_id=self.spec.session_id,
            env_id=self.spec.env_id,
            total_steps=self.step,
            total_episodes=len(self._book.results),
            episodes=tuple(self._book.results),
            telemetry=self._telemetry.summary(),
            samples=self._telemetry.snapshot(),
        )
        if self._over:
            self._final = report
        return report

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
        self._parts(
            RouteTelemetry(
                self.spec.limits.telemetry_window, self._now(), windows=self._gate.window
            )
        )
        try:
            try:
                await self._drive()
            except BaseException as exc:
                error = first_error(exc)
                if error is None:
                    self.error = RouteCancelled(self.spec.route_id, self.step, self._reason())
                    await self._shutdown_after_failure(self.error)
                    raise first_cancelled(exc) from None
                await self._fail(error)
                if error is exc:
                    raise
                # Unwrapped from a nursery's group: keep the error's own cause, drop the group.
                raise error from error.__cause__
            await self._shutdown_terminal(END_REASON)
            await self._gate.emit(
                "session_ended",
                SessionEndedEvent(self.ctx, END_REASON, self.step, len(self._book.results)),
            )
        finally:
            self._over = True
        return self.report()

    async def _drive(self) -> None:
        """``session_started``, setup, the drive mode's loop, then the telemetry flush."""
        await self._gate.emit("session_started", SessionStartedEvent(self.ctx))
        async with trio.open_nursery() as background:
            session = await self._setup()
            loop = RouteLoop(
                self._calls,
                self._gate,
                self._book,
                background,
                session.action_space,
                session.observation_space,
            )
            await drive_route(loop, session, self._fused)
            # Pending best-effort ResetAdapters get the close timeout to finish.
            close = self.spec.limits.service_close_timeout
            scope = background.cancel_scope
            scope.deadline = min(scope.deadline, self._now() + close)
        await self._gate.flush_telemetry(
            self._telemetry, self._now(), self.step, len(self._book.results)
        )

    async def _setup(self) -> Session:
        """Handshake, then configure; setup calls each get their own deadline scope."""
        calls = self._calls
        timer = DeadlineTimer(self.spec.route_id, self._now)
        session = await handshake(self.spec, calls, timer)
        self.contract, self.edition = session.contract, session.edition
        self.num_envs = calls.num_envs = session.num_envs
        calls.set_observation_space(session.observation_space)
        self._configure_sent = True
        await configure(self.spec, session, calls, timer)
        return session

    async def _fail(self, error: BaseException) -> None:
        """Record ``error``, tell ``on_error`` at once, then shut down after the failure."""
        self.error = error
        if self._on_error is not None:
            try:
                self._on_error(error)
            except Exception as cb_exc:
                logger.warning("route %s: on_error callback failed: %s", self.spec.route_id, cb_exc)
        await self._shutdown_after_failure(error)

    def _reason(self) -> str:
        """The cancellation reason from the caller's callback (never raises)."""
        if self._cancel_reason is None:
            return DEFAULT_CANCEL_REASON
        try:
            return str(self._cancel_reason())
        except Exception as exc:
            logger.warning("route %s: cancel_reason callback failed: %s", self.spec.route_id, exc)
            return DEFAULT_CANCEL_REASON

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
                await self._gate.emit("session_failed", SessionFailedEvent(self.ctx, reason, error))

    async def _shutdown_terminal(self, reason: str) -> None:
        """Release the model route and (with ``close_env_on_end``) close the env, both at once.

        Shielded and bounded by the service close timeout, so it runs while the
        route is being cancelled and never hangs; failures are logged only.
        """
        if self._terminal_done:
            return
        self._terminal_done = True
        # Nothing to release or close before configure/resolve went out.
        if not self._configure_sent:
            return
        timeout = self.spec.limits.service_close_timeout
        with trio.CancelScope(shield=True):
            with trio.move_on_after(timeout) as scope:
                if not self.spec.close_env_on_end:
                    # Only the release: no nursery and task for it (a cost per route).
                    await self._release_model(reason, timeout)
                else:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._release_model, reason, timeout)
                        nursery.start_soon(self._close_env, timeout)
            if scope.cancelled_caught:
                await self._gate.log(
                    "warning",
                    f"route shutdown did not finish within {timeout}s; relying on owner shutdown",
                )

    async def _release_model(self, reason: str, timeout: float) -> None:
        request = model_pb.ReleaseAdapterRequest(
            context=self._calls.context("release_adapter"), reason=reason
        )
        try:
            await self.model.release_adapter(request, timeout)
        except Exception as exc:
            await self._gate.log(
                "warning",
                f"model route release failed during route shutdown; relying on owner "
                f"shutdown: {exc}",
            )

    async def _close_env(self, timeout: float) -> None:
        try:
            final = await self.env.close(timeout)
        except Exception as exc:
            await self._gate.log(
                "warning", f"environment close failed during route shutdown: {exc}"
            )
            return
        await self._gate.log("debug", f"environment closed ({len(final)} final episode(s))")
