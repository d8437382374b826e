"""The transport-independent env host: one Join session's semantics, minus the wire.

An :class:`EnvHost` takes ``env_pb.JoinRequest`` messages and answers each with
an ``env_pb.JoinResponse`` (its oneof arm always set; ``request_id`` and
``endpoint_total_ns`` are the transport's business). It calls the gymnasium
env synchronously, so transports run :meth:`EnvHost.run` in a worker thread:

    ticket = host.admit(request)          # on the event loop, in arrival order
    reply = run_in_thread(host.run, ticket)

``admit`` fixes the request's place in line; ``run`` waits for earlier
requests on the same lanes, then executes. Requests on different lanes of a
lane endpoint run concurrently; everything else runs in arrival order.

Errors follow 0.1.0 (protocol notes §3.5): bad actions are INVALID_ACTION and
recoverable; an exception from the env is INTERNAL, non-recoverable, and
:attr:`HostReply.end_stream` tells the transport to end the session.
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
import betterproto2

from .._errors import format_duration
from .._protocol import WORKFLOW_EDITION, core_pb, env_pb
from .._wire._step_parts import StepParts
from ._episodes import EpisodeBook
from ._schedule import Scheduler, Ticket

__all__ = ["SUPPORTED_EDITIONS", "Call", "EnvFailure", "EnvHost", "HostReply"]

T = TypeVar("T")

SUPPORTED_EDITIONS: tuple[str, ...] = (WORKFLOW_EDITION,)

UNKNOWN_KIND = (
    "empty or unrecognized Join request (a newer-edition arm this build does not implement?)"
)


class EnvFailure(Exception):
    """An operation's answer is an ``EnvError``. ``end_stream`` defaults to ``not recoverable``."""

    def __init__(
        self,
        code: env_pb.EnvErrorCode,
        message: str,
        *,
        recoverable: bool,
        end_stream: bool | None = None,
        debug_info: str = "",
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable
        self.end_stream = (not recoverable) if end_stream is None else end_stream
        self.debug_info = debug_info

    def to_error(self) -> env_pb.EnvError:
        return env_pb.EnvError(
            code=self.code,
            message=self.message,
            is_recoverable=self.recoverable,
            debug_info=self.debug_info,
        )


def invalid_action(message: str) -> EnvFailure:
    return EnvFailure(env_pb.EnvErrorCode.INVALID_ACTION, message, recoverable=True)


def unsupported(message: str) -> EnvFailure:
    return EnvFailure(env_pb.EnvErrorCode.UNSUPPORTED, message, recoverable=True)


def internal(message: str) -> EnvFailure:
    return EnvFailure(env_pb.EnvErrorCode.INTERNAL, message, recoverable=False)


@attrs.frozen
class HostReply:
    """One answer, with where its time went (the additive JoinResponse timing fields).

    ``user_ns``: inside env calls; ``decode_ns``: decoding and checking the action;
    ``encode_ns``: encoding observation and infos; ``queue_ns``: waiting for
    earlier requests on the same lanes.
    """

    response: env_pb.JoinResponse
    end_stream: bool = False
    user_ns: int = 0
    decode_ns: int = 0
    encode_ns: int = 0
    queue_ns: int = 0

    @property
    def error(self) -> env_pb.EnvError | None:
        return (
            self.response.error
            if betterproto2.which_one_of(self.response, "kind")[0] == "error"
            else None
        )


class _Phase:
    """Adds the time spent inside a ``with`` block to one of a :class:`Call`'s counters."""

    __slots__ = ("_call", "_field", "_start")

    def __init__(self, call: Call, field: str) -> None:
        self._call = call
        self._field = field
        self._start = 0

    def __enter__(self) -> None:
        self._start = time.perf_counter_ns()

    def __exit__(self, *_exc: object) -> None:
        call, field = self._call, self._field
        setattr(call, field, getattr(call, field) + time.perf_counter_ns() - self._start)


class Call:
    """Per-request context: the deadline and the time spent in user code."""

    __slots__ = (
        "_deadline_ns",
        "answer",
        "decode_ns",
        "encode_ns",
        "end_stream",
        "error",
        "kind",
        "parts",
        "queue_ns",
        "timeout_ms",
        "user_ns",
    )

    def __init__(self, kind: str, timeout_ms: int, admitted_ns: int, queue_ns: int = 0) -> None:
        self.kind = kind
        self.timeout_ms = timeout_ms
        self._deadline_ns = admitted_ns + timeout_ms * 1_000_000 if timeout_ms else None
        self.user_ns = 0
        self.decode_ns = 0
        self.encode_ns = 0
        self.queue_ns = queue_ns
        #: Once answered: the response arm (a ``ConfigureEnvResponse``, ``StepResponse``, ...),
        #: or None when the answer is :attr:`error`.
        self.answer: Any = None
        #: The ``EnvError`` answer, if the operation failed.
        self.error: env_pb.EnvError | None = None
        #: Whether the Join stream ends after this answer (Close, non-recoverable errors).
        self.end_stream = False
        #: Whether a one-lane step may answer with a ``wire.StepParts`` (see ``call_now``).
        self.parts = False

    def fail(self, failure: EnvFailure) -> None:
        """Answer with ``failure``'s ``EnvError`` (and end the stream if it says so)."""
        self.answer = None
        self.error = failure.to_error()
        self.end_stream = failure.end_stream

    @property
    def op(self) -> str:
        """The operation's name in messages (``env.step``); built only when a message needs it."""
        return f"env.{self.kind}"

    def decoding(self) -> _Phase:
        """Time the block as decoding (a class, not a generator: this runs every step)."""
        return _Phase(self, "decode_ns")

    def encoding(self) -> _Phase:
        """Time the block as encoding."""
        return _Phase(self, "encode_ns")

    def reply(self) -> HostReply:
        """The answer in its ``JoinResponse`` envelope, with the timings (for transports)."""
        if self.error is not None:
            response = env_pb.JoinResponse(error=self.error)
        else:
            response = env_pb.JoinResponse(**{self.kind: self.answer})
        return HostReply(
            response,
            end_stream=self.end_stream,
            user_ns=self.user_ns,
            decode_ns=self.decode_ns,
            encode_ns=self.encode_ns,
            queue_ns=self.queue_ns,
        )

    def env(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call into the env; any exception becomes INTERNAL ``"<what> failed: Type: msg"``."""
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise internal(f"{what} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            self.user_ns += time.perf_counter_ns() - start

    def check_deadline(self) -> None:
        """After the env call returned: past ``timeout_ms``, the result is discarded (TIMEOUT).

        0.1.0 drains a slow call rather than abandoning it (the env is not
        re-entrant), so the error goes out only once the call has finished,
        and the episode bookkeeping is left as if the call never happened.
        """
        if self._deadline_ns is not None and time.monotonic_ns() > self._deadline_ns:
            raise EnvFailure(
                env_pb.EnvErrorCode.TIMEOUT,
                f"{self.op} timed out after {format_duration(self.timeout_ms / 1000)}",
                recoverable=True,
            )


class EnvHost(abc.ABC):
    """Serves one gymnasium env (or lanes, or a vector env) to one Join session at a time."""

    def __init__(
        self,
        *,
        contract: core_pb.EnvContract,
        capabilities: Mapping[str, str],
        closers: Sequence[Callable[[], Any]] = (),
    ) -> None:
        self._contract = contract
        self._capabilities = dict(capabilities)
        self._closers = list(closers)
        self._sched = Scheduler()
        self.book = EpisodeBook(contract.num_envs)
        self.selected_edition: str | None = None
        self._closed = False

    # -- what the handshake advertises -------------------------------------------------

    @property
    def contract(self) -> core_pb.EnvContract:
        return self._contract

    @property
    def capabilities(self) -> dict[str, str]:
        return dict(self._capabilities)

    @property
    def num_envs(self) -> int:
        return self._contract.num_envs

    @property
    def concurrent(self) -> bool:
        """True when two requests can run at once (lanes backed by different envs)."""
        return False

    @property
    def one_lane(self) -> bool:
        """True when :meth:`step_now` can step this endpoint (one env, a planned step)."""
        return False

    # -- the request path ----------------------------------------------------------------

    def admit(self, request: env_pb.JoinRequest) -> Ticket:
        """Take ``request``'s place in line. Non-blocking; call in arrival order."""
        return self._sched.admit(request, self._lanes_of(request), time.monotonic_ns())

    def run(self, ticket: Ticket) -> HostReply | None:
        """Execute an admitted request (blocking: call from a worker thread).

        Returns None for a ticket discarded before it started.
        """
        call = self.run_call(ticket)
        return None if call is None else call.reply()

    def run_call(self, ticket: Ticket) -> Call | None:
        """:meth:`run`, answering with the bare :class:`Call` (no ``JoinResponse`` envelope)."""
        if not self._sched.wait_turn(ticket):
            return None
        queue_ns = max(0, time.monotonic_ns() - ticket.admitted_ns)
        try:
            request = ticket.request
            assert isinstance(request, env_pb.JoinRequest)
            kind, arm = betterproto2.which_one_of(request, "kind")
            return self._answer(kind, arm, ticket.admitted_ns, queue_ns)
        finally:
            self._sched.finish(ticket)

    def ready_now(self, ticket: Ticket) -> bool:
        """Whether :meth:`run` would start ``ticket`` without waiting (never blocks)."""
        return self._sched.ready_now(ticket)

    def discard(self, ticket: Ticket) -> None:
        """Give up a ticket whose ``run`` will never be called (a no-op once it started)."""
        self._sched.discard(ticket)

    def handle(self, request: env_pb.JoinRequest) -> HostReply:
        """Admit and run in one go (blocking)."""
        reply = self.run(self.admit(request))
        assert reply is not None
        return reply

    def end_session(self) -> None:
        """The Join ended without Close (half-close, cancel, disconnect): drop leftover episodes."""
        self.book.clear()
        self.selected_edition = None
        self._on_session_end()

    def close(self) -> None:
        """Close the gymnasium env(s) this host owns. Idempotent; errors are swallowed."""
        if self._closed:
            return
        self._closed = True
        for closer in self._closers:
            try:
                closer()
            except Exception:
                continue

    # -- dispatch ------------------------------------------------------------------------

    def call_now(self, kind: str, body: Any, *, parts: bool = False) -> Call | None:
        """Execute one request (``kind`` names its Join arm) at once, without a ticket,
        if no admitted request is pending; else None (then admit it instead).

        For a caller that runs requests on the thread that admits them (an
        in-process endpoint running inline): nothing can start meanwhile. The
        answer is the bare :class:`Call`: such a caller needs the response arm
        only, and an envelope per step costs more than the bookkeeping. With ``parts``
        a one-lane step may answer with a :class:`~rlmesh_trio._wire._step_parts.StepParts`
        instead of a ``StepResponse`` (for a caller that writes the reply bytes itself).
        """
        if not self._sched.idle():
            return None
        return self._answer(kind, body, time.monotonic_ns(), parts=parts)

    def _answer(
        self, kind: str, arm: Any, admitted_ns: int, queue_ns: int = 0, *, parts: bool = False
    ) -> Call:
        """Run one operation; its answer (or ``EnvError``) and timings are on the returned call."""
        body: Any = arm
        call = Call(kind, getattr(body, "timeout_ms", 0), admitted_ns, queue_ns)
        call.parts = parts
        try:
            if kind == "step":
                call.answer = self._step(body, call)
            elif kind == "reset":
                call.answer = self._reset(body, call)
            elif kind == "configure":
                call.answer = self._configure(body)
            elif kind == "render":
                call.answer = self._render_keeping_session(body, call)
            elif kind == "close":
                final = self.book.close_all()
                self._on_session_end()
                call.answer = env_pb.CloseEnvsResponse(final_episodes=final)
                call.end_stream = True
            else:
                raise unsupported(UNKNOWN_KIND)
        except EnvFailure as failure:
            call.fail(failure)
        return call

    def step_now(self, action: list[bytes], timeout_ms: int) -> Call | None:
        """Step a one-env endpoint at once with ``action`` (its frame's leaves): the
        answer is a ``StepParts``, as a served step's with ``parts``; None (nothing
        done) where the endpoint has no one-lane plan or an admitted request is pending.

        For an in-process caller running its calls inline (see :meth:`call_now`).
        """
        return None

    def _configure(self, body: env_pb.ConfigureEnvRequest) -> env_pb.ConfigureEnvResponse:
        edition = body.selected_workflow_edition
        # An empty pin is a no-op (0.1.0 accepts it); repeated configures are acknowledged.
        if edition and edition not in SUPPORTED_EDITIONS:
            implements = "[" + ", ".join(json.dumps(e) for e in SUPPORTED_EDITIONS) + "]"
            raise EnvFailure(
                env_pb.EnvErrorCode.INVALID_ACTION,
                f"runtime pinned this env to workflow edition {json.dumps(edition)}, "
                f"which this env build does not implement (implements {implements})",
                recoverable=False,
            )
        if edition:
            self.selected_edition = edition
        return env_pb.ConfigureEnvResponse()

    # -- flavour-specific parts ----------------------------------------------------------

    def _lanes_of(self, request: env_pb.JoinRequest) -> Iterable[int] | None:
        """Lanes a request touches (None: the whole endpoint, strictly in order)."""
        return None

    def _on_session_end(self) -> None:  # noqa: B027 - optional hook
        """Reset flavour-specific per-session state."""

    @abc.abstractmethod
    def _reset(self, body: env_pb.ResetRequest, call: Call) -> env_pb.ResetResponse: ...

    @abc.abstractmethod
    def _step(self, body: env_pb.StepRequest, call: Call) -> env_pb.StepResponse | StepParts: ...

    @abc.abstractmethod
    def _render(self, body: env_pb.RenderRequest, call: Call) -> env_pb.RenderResponse: ...

    def _render_keeping_session(
        self, body: env_pb.RenderRequest, call: Call
    ) -> env_pb.RenderResponse:
        """A render whose env call raised is a recoverable error: the session goes on.

        A frame changes no episode state, so a viewer or recorder whose render
        fails loses that frame, not the route (rlmesh 0.1.0 ends the session here).
        """
        try:
            return self._render(body, call)
        except EnvFailure as failure:
            if failure.recoverable:
                raise
            raise EnvFailure(
                failure.code, failure.message, recoverable=True, debug_info=failure.debug_info
            ) from failure
