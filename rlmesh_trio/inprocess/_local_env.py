"""``LocalEnv``: a gymnasium env driven in-process, with no network, as a ``RuntimeEnv``.

It wraps the same :class:`~rlmesh_trio._envhost.EnvHost` the gRPC env server
uses, so a route sees exactly the semantics of a 0.1.0 env server: the
contract, episode ids, completed and interrupted episodes, NEXT_STEP rolls,
lanes, action checks and error codes. Requests and responses are the wire
protobuf messages; nothing is serialised.

Where env calls run is a :class:`~rlmesh_trio.runtime._placement.CallPlacement`:
by default the first calls run in a worker thread and are timed, and an env
whose calls are cheap (CartPole: ~10 us) then runs inline on the Trio thread,
where a thread handoff would cost several times the call; a slow call sends
it back to threads. Configure and close run no env code and always run
inline. Each LocalEnv has its own thread limiter (one thread per
lane, plus one), so many routes do not starve each other of Trio's shared
thread pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import trio

from .._blocks import BlockReset, BlockStep
from .._endpoints import EndpointInfo, Reply
from .._envhost import SUPPORTED_EDITIONS, Call, EnvHost, make_host
from .._envhost._block import EnvBlock, block_of
from .._errors import ConnectError, EnvRpcError, InvalidSpec, ProtocolError, format_duration
from .._protocol import WORKFLOW_EDITION, env_pb, spaces_pb
from .._wire._step_parts import StepParts
from ..runtime._placement import DEFAULT_INLINE_LIMIT, TIME_SLICE, CallPlacement, settle_inline

__all__ = ["LocalEnv"]

_SESSION_ENDED = "transport error: connection closed (the local env session ended)"
#: Requests the host answers from its own bookkeeping, with no env code: never worth a
#: worker thread (a route's configure and close would otherwise be two thread hops, and
#: two of an adaptive env's probes, which are there to time the env's own calls).
_HOST_ONLY = frozenset({"configure", "close"})


def _code_label(code: Any) -> str:
    # INVALID_ACTION -> InvalidAction, the way 0.1.0 prints error codes in messages.
    name = getattr(code, "name", None) or str(code)
    return "".join(part.capitalize() for part in name.split("_"))


def _is_env_like(value: Any) -> bool:
    # A class has reset/step too, but it is a factory.
    return not isinstance(value, type) and hasattr(value, "reset") and hasattr(value, "step")


async def _close_in_thread(close: Callable[[], None]) -> None:
    """Start ``close`` in a thread now (not a checkpoint first), then wait for it.

    ``trio.to_thread.run_sync`` would check for cancellation before starting
    the thread, and shielding it would let a hanging close outlive every bound.
    """
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    outcomes: list[Any] = []

    def deliver(result: Any) -> None:
        outcomes.append(result)
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass  # the wait was abandoned and the run is over: nobody to tell

    trio.lowlevel.start_thread_soon(close, deliver, name="rlmesh-trio env close")
    await done.wait()
    outcomes[0].unwrap()


class LocalEnv:
    """An in-process env endpoint: a gymnasium ``Env``, a list of them (lanes), a ``VectorEnv``,
    or a zero-argument factory returning one of those.

    ``close_env`` (default: True for a factory, False for an env you passed in)
    decides whether :meth:`aclose` closes the gymnasium env.

    ``threaded`` says where reset/step/render run: ``None`` (default,
    adaptive) times the first 8 calls in a worker thread and runs later calls
    inline on the Trio thread while each stays under ``inline_limit`` seconds
    (default 1 ms), moving back to threads for good after a slower one;
    ``True`` always uses a worker thread; ``False`` always runs inline.

    Timeouts (``env_reset_timeout``, ``env_step_timeout``): a threaded call
    is abandoned at its deadline and the route fails with ``OperationTimeout``
    right then. An inline call cannot be interrupted: one that returns past
    its deadline fails the route with the same ``OperationTimeout`` when it
    returns. A lane request that must wait for a lane still busy in a thread
    also goes to a thread, so the Trio thread never blocks on another call.

    Raises ``TypeError`` for something that is not an env, envs or a factory,
    and ``ValueError`` for a negative ``inline_limit``.
    """

    def __init__(
        self,
        env_or_factory: Any,
        *,
        label: str | None = None,
        close_env: bool | None = None,
        threaded: bool | None = None,
        inline_limit: float = DEFAULT_INLINE_LIMIT,
    ) -> None:
        given_env = _is_env_like(env_or_factory) or isinstance(env_or_factory, list | tuple)
        if not given_env and not callable(env_or_factory):
            raise TypeError(
                "LocalEnv needs a gymnasium env, a list of envs, a VectorEnv or an env factory; "
                f"got {type(env_or_factory).__name__}"
            )
        self._env: Any = env_or_factory if given_env else None
        self._factory: Callable[[], Any] | None = None if given_env else env_or_factory
        self._close_env = (not given_env) if close_env is None else close_env
        self._label = label
        self._host: EnvHost | None = None
        self._block: EnvBlock | None = None
        #: Where env calls run now (``placement.inline``); see the class doc.
        # The time slice: a route whose env and policy both run inline still lets others run.
        self.placement = CallPlacement(threaded, inline_limit=inline_limit, time_slice=TIME_SLICE)
        self._session_open = False
        self._session_ended = False
        self._aclosed = False

    def __repr__(self) -> str:
        return f"LocalEnv({self.label!r})"

    @property
    def label(self) -> str:
        if self._label is not None:
            return self._label
        if self._host is not None and self._host.contract.spec is not None:
            return self._host.contract.spec.id
        return "local-env"

    @property
    def encoded_observation_space(self) -> spaces_pb.SpaceSpec | None:
        """The spec object every observation of this env is encoded for, in this process
        (the contract's; None before :meth:`connect`). A route checking replies against
        this very spec skips its per-step framing check: the codec frames them right."""
        if self._host is None or self._host.contract.spec is None:
            return None
        return self._host.contract.spec.observation_space

    @property
    def steps_on_leaves(self) -> bool:
        """Whether :meth:`step_leaves` can step this env (connected, one env with a
        planned step: not a vector env or a list of lanes)."""
        return self._host is not None and self._host.one_lane

    @property
    def host(self) -> EnvHost | None:
        """The env host (None before :meth:`connect`)."""
        return self._host

    # -- RuntimeEnv ----------------------------------------------------------------------

    async def connect(self) -> EndpointInfo:
        """Build the env (a factory runs in a worker thread) and report its contract.

        Cancellation: a cancelled factory call is abandoned; its env, if it is
        ever built, is not used.
        """
        host = await self._ensure_host()
        return EndpointInfo(
            label=self.label,
            editions=SUPPORTED_EDITIONS,
            preferred_edition=WORKFLOW_EDITION,
            capabilities=host.capabilities,
            contract=host.contract,
        )

    async def configure(self, edition: str) -> None:
        """Open a session and pin ``edition``; raises :class:`EnvRpcError` for an edition
        this env does not implement."""
        await self._ensure_host()
        self._session_open = True
        self._session_ended = False
        await self._call("configure", env_pb.ConfigureEnvRequest(selected_workflow_edition=edition))

    async def reset(self, request: env_pb.ResetRequest) -> Reply[env_pb.ResetResponse]:
        """Reset (all lanes, or ``env_indices``). Cancellation: the env call is abandoned
        to finish in its thread; the env is then only good for close/aclose."""
        reset, telemetry = await self._call("reset", request)
        return Reply(reset, telemetry)

    async def step(self, request: env_pb.StepRequest) -> Reply[env_pb.StepResponse]:
        """Step (all lanes, or ``env_indices``). Cancellation as for :meth:`reset`."""
        step, telemetry = await self._call("step", request)
        return Reply(step, telemetry)

    async def step_leaves(
        self, action: list[bytes], timeout_ms: int
    ) -> tuple[StepParts, dict[str, float]] | None:
        """One lane-0 step of a one-env endpoint with ``action`` as its frame's leaves,
        run inline right now, and its endpoint telemetry: the answer of :meth:`step`
        as ``StepParts``, no request or response message built. None (nothing done)
        when it cannot run so (the env is a vector or lanes, its calls run in threads
        now, or a request is pending): send :meth:`step` a request instead.

        Cancellation: as :meth:`step` after an inline call.

        Raises:
            EnvRpcError: what :meth:`step` raises for the same action.
        """
        host = self._host
        placement = self.placement
        if host is None or not placement.inline or self._aclosed or self._session_ended:
            return None
        start = time.perf_counter_ns()
        call, turn = placement.call_inline(host.step_now, action, timeout_ms)
        if call is None:
            return None
        await settle_inline(yield_now=turn)
        return self._settled(host, call, start)

    # -- LaneBlockEnv (rlmesh_trio._blocks) ---------------------------------------------

    @property
    def block_ready(self) -> bool:
        """Whether the lanes can be driven as one block (connected; a list of envs or a
        DISABLED ``VectorEnv``; Box/Discrete observations; Discrete/Box actions)."""
        return self._block is not None and not self._aclosed and not self._session_ended

    @property
    def lane_block(self) -> EnvBlock | None:
        """The block of this endpoint's single envs, when it is ready and has one (a
        fused block steps them with other endpoints' envs: ``FusedEnvs``)."""
        if not self.block_ready or self._block is None or self._block.envs is None:
            return None
        return self._block

    @property
    def num_lanes(self) -> int:
        return self._host.num_envs if self._host is not None else 1

    async def reset_lanes(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        timeout: float,
        *,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """Reset ``lanes`` in one call, where the placement says (``timeout`` is the
        caller's to keep). Cancellation as for :meth:`reset`.

        Raises:
            EnvRpcError: a lane's reset raised (``env_index`` names it).
        """
        block = self._live_block("reset")
        reply: BlockReset = await self._block_call(block.reset, lanes, seeds, options)
        return reply

    async def step_lanes(self, lanes: np.ndarray, actions: np.ndarray, timeout: float) -> BlockStep:
        """Step ``lanes`` in one call, where the placement says (``timeout`` is the
        caller's to keep). Cancellation as for :meth:`step`.

        Raises:
            EnvRpcError: an invalid action, or a lane's env raised (``env_index`` names it).
        """
        block = self._live_block("step")
        reply: BlockStep = await self._block_call(block.step, lanes, actions)
        return reply

    def _live_block(self, kind: str) -> EnvBlock:
        if self._block is None or self._aclosed or self._session_ended:
            raise EnvRpcError(f"env.{kind}", 0, _SESSION_ENDED)
        self._session_open = True
        return self._block

    async def _block_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` where the placement says, judged per lane; an env failure
        ends the session as a non-recoverable env error does on the message path."""
        start = time.perf_counter_ns()
        try:
            reply = await self.placement.run(fn, *args, rows=len(args[0]))
        except EnvRpcError as exc:
            if not exc.recoverable and self._host is not None:
                self._session_ended = True
                self._host.end_session()
            raise
        took = (time.perf_counter_ns() - start) / 1e6
        reply.telemetry.update({"endpoint.total": took, "endpoint.user": took})
        return reply

    async def render(self, request: env_pb.RenderRequest | None = None) -> env_pb.RenderResponse:
        """Render one lane (PNG bytes in ``frame``, or an empty response for no frame)."""
        body = request if request is not None else env_pb.RenderRequest()
        render, _ = await self._call("render", body)
        assert isinstance(render, env_pb.RenderResponse)
        return render

    async def close(self, timeout: float) -> list[env_pb.EpisodeMetadata]:
        """Close the session's episodes and return them (the final episodes of a Close).

        Bounded by ``timeout`` seconds (raises :class:`EnvRpcError` ``env.close``
        when a slow env call holds it up). Returns ``[]`` if no session is open.
        """
        if self._host is None or not self._session_open or self._session_ended:
            return []
        try:
            with trio.fail_after(timeout):
                request = env_pb.CloseEnvsRequest(reason="client close")
                closed, _ = await self._call("close", request)
        except trio.TooSlowError:
            raise EnvRpcError(
                "env.close", 0, f"close timed out after {format_duration(timeout)}"
            ) from None
        assert isinstance(closed, env_pb.CloseEnvsResponse)
        return list(closed.final_episodes)

    async def aclose(self) -> None:
        """End the session (leftover episodes are dropped, like a half-close) and, if this
        LocalEnv owns the env, close it in a thread of its own. Idempotent.

        Cancellation: the env's ``close()`` always starts, even from a cancelled
        scope; only the wait for it is cancellable, so a caller's bound
        (``move_on_after``) ends the wait at once and an env whose ``close()``
        hangs finishes (or hangs) in its thread without holding the run.

        Raises:
            Exception: whatever the env's ``close()`` raised, when it returns in time.
        """
        if self._aclosed:
            return
        self._aclosed = True
        host = self._host
        if host is None:
            return
        if self._session_open and not self._session_ended:
            host.end_session()
        self._session_ended = True
        if self._close_env:
            await _close_in_thread(host.close)

    async def __aenter__(self) -> LocalEnv:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- internals -----------------------------------------------------------------------

    async def _ensure_host(self) -> EnvHost:
        if self._host is None:
            env = self._env
            if env is None:
                assert self._factory is not None
                try:
                    env = await trio.to_thread.run_sync(self._factory, abandon_on_cancel=True)
                except Exception as exc:
                    raise ConnectError(
                        self.label, f"the env factory failed: {type(exc).__name__}: {exc}"
                    ) from exc
                self._env = env
            try:
                host = make_host(env, close_env=self._close_env)
            except (ValueError, TypeError, ProtocolError) as exc:
                raise InvalidSpec(f"env {self.label} cannot be served: {exc}") from exc
            self.placement.set_limiter(trio.CapacityLimiter(host.num_envs + 1))
            self._host = host
            self._block = block_of(host)
        return self._host

    async def _call(self, kind: str, body: Any) -> tuple[Any, dict[str, float]]:
        """Run one request (``kind``: its Join arm) on the host, where the placement says;
        return the response arm and the endpoint telemetry."""
        host = self._host
        if host is None:
            host = await self._ensure_host()
        if self._aclosed or self._session_ended:
            raise EnvRpcError(f"env.{kind}", 0, _SESSION_ENDED)
        self._session_open = True
        start = time.perf_counter_ns()
        call: Call | None = None
        placement = self.placement
        if kind in _HOST_ONLY:
            call = host.call_now(kind, body)
            await settle_inline()
        elif placement.inline:
            # Nothing pending: run it here, without a ticket or a JoinRequest to decode
            # (placement.run's inline half, one coroutine frame less per step).
            call, turn = placement.call_inline(host.call_now, kind, body)
            await settle_inline(yield_now=turn)
        if call is None:
            call = await self._run_ticket(host, env_pb.JoinRequest(**{kind: body}))
        return self._settled(host, call, start)

    def _settled(self, host: EnvHost, call: Call, start: int) -> tuple[Any, dict[str, float]]:
        """A run call's response arm and endpoint telemetry (``start``: when the call was
        made, ``perf_counter_ns``); its error raised, the session ended where it says.

        Raises:
            EnvRpcError: the env answered with an error.
        """
        kind = call.kind
        total_ns = time.perf_counter_ns() - start
        telemetry = {"endpoint.total": total_ns / 1e6, "endpoint.user": call.user_ns / 1e6}
        if call.decode_ns:
            telemetry["endpoint.decode"] = call.decode_ns / 1e6
        if call.encode_ns:
            telemetry["endpoint.encode"] = call.encode_ns / 1e6
        if call.queue_ns:
            telemetry["endpoint.queue"] = call.queue_ns / 1e6
        error = call.error
        if call.end_stream:
            # Close, or a non-recoverable error: 0.1.0 ends the Join stream here.
            self._session_ended = True
            if kind != "close" or error is not None:
                host.end_session()
        if error is not None:
            raise EnvRpcError(
                f"env.{kind}",
                0,
                f"environment error: [{_code_label(error.code)}] {error.message}",
                code=int(error.code),
                recoverable=error.is_recoverable,
            )
        return call.answer, telemetry

    async def _run_ticket(self, host: EnvHost, request: env_pb.JoinRequest) -> Call:
        """Admit ``request`` and run it (in a worker thread if it must wait for a busy lane)."""
        ticket = host.admit(request)
        call: Call | None = None
        try:
            if host.ready_now(ticket):
                call = await self.placement.run(host.run_call, ticket)
            else:  # waits for a lane busy in a thread: must not block the Trio thread
                call = await self.placement.run_threaded(host.run_call, ticket)
        finally:
            if call is None:
                host.discard(ticket)
        assert call is not None
        return call
